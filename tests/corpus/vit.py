"""A vision transformer: ViT (2 layers, hidden 32, 4 heads) on 32x32 images cut into 8x8 patches."""

from transformers import ViTConfig, ViTForImageClassification

from tests.corpus.common import image_rows, seeded


def make(batch: str = "1", size: str = "32"):
    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                       image_size=int(size), patch_size=8, num_labels=10)
    return seeded(lambda: ViTForImageClassification(config)), (image_rows(int(batch), int(size)),)
