"""A decoder with learned positions: GPT-2 (2 layers, width 64, 4 heads)."""

from transformers import GPT2Config, GPT2LMHeadModel

from tests.corpus.common import VOCAB, seeded, token_rows


def make(batch: str = "1", tokens: str = "16"):
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=0,
                        eos_token_id=0)
    return seeded(lambda: GPT2LMHeadModel(config)), (token_rows(int(batch), int(tokens)),)
