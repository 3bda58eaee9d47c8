"""A vision conv net with batch norm: ResNet (basic blocks, 2 stages of widths 16 and 32), in eval mode
(batch norm from its running statistics) on 32x32 images."""

from transformers import ResNetConfig, ResNetForImageClassification

from tests.corpus.common import image_rows, seeded


def make(batch: str = "1", size: str = "32"):
    config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic",
                          num_labels=10)
    return seeded(lambda: ResNetForImageClassification(config)), (image_rows(int(batch), int(size)),)
