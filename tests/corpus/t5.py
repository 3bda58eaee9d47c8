"""An encoder-decoder with relative position buckets: T5 (2 layers each side, d_model 32, 4 heads). Its
bucketing takes the log of relative distances, 0 among them: log(0) is -inf, and the cast of -inf to
int64 gives the most negative int64, an integer output the tracer must take as it is."""

import torch
from transformers import T5Config, T5ForConditionalGeneration

from tests.corpus.common import VOCAB, seeded, token_rows


def make(batch: str = "1", tokens: str = "12"):
    config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    b, t = int(batch), int(tokens)
    ids = token_rows(b, t)
    decoder = torch.cat([torch.zeros(b, 1, dtype=torch.long), ids[:, : t // 2 - 1]], dim=1)
    return seeded(lambda: T5ForConditionalGeneration(config)), {"input_ids": ids, "decoder_input_ids": decoder}
