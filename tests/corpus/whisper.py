"""An audio encoder-decoder with a conv front end: Whisper (2 conv layers over 16 mel bins, 1 layer each side,
d_model 32) on 32 frames of noise per row, with a 4-token decoder prompt."""

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

from tests.corpus.common import VOCAB, seeded, token_rows


def make(batch: str = "1", frames: str = "32"):
    config = WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, max_source_positions=int(frames) // 2, max_target_positions=16,
                           pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
    b, n = int(batch), int(frames)
    mel = torch.stack([torch.randn(16, n, generator=torch.Generator().manual_seed(500 + r)) for r in range(b)])
    return seeded(lambda: WhisperForConditionalGeneration(config)), {"input_features": mel,
                                                                    "decoder_input_ids": token_rows(b, 4)}
