"""An audio model with a conv front end: Wav2Vec2 (three 1-D convolutions over the raw waveform, group norm
on the first, then 2 transformer layers of hidden 32) on 0.1 s of 16 kHz noise per row."""

import torch
from transformers import Wav2Vec2Config, Wav2Vec2Model

from tests.corpus.common import seeded


def make(batch: str = "1", samples: str = "1600"):
    config = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                            conv_dim=(16, 16, 16), conv_stride=(5, 4, 4), conv_kernel=(10, 4, 4),
                            num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4, feat_extract_norm="group",
                            mask_time_prob=0.0, do_stable_layer_norm=False, vocab_size=32)
    b, n = int(batch), int(samples)
    audio = torch.stack([torch.randn(n, generator=torch.Generator().manual_seed(300 + r)) for r in range(b)])
    return seeded(lambda: Wav2Vec2Model(config)), (audio,)
