"""An encoder run with an attention mask and padding: BERT (2 layers, hidden 64, 4 heads). Rows after
the first are padded (their last positions masked out), as a batch of sentences of other lengths is;
``mask=0`` leaves the mask out."""

import torch
from transformers import BertConfig, BertModel

from tests.corpus.common import VOCAB, seeded, token_rows


def make(batch: str = "1", tokens: str = "16", mask: str = "1"):
    config = BertConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        vocab_size=VOCAB, max_position_embeddings=64, pad_token_id=0)
    b, t = int(batch), int(tokens)
    ids = token_rows(b, t)
    attention = torch.ones(b, t, dtype=torch.long)
    for r in range(1, b):  # row r keeps t - 2r tokens (at least 1)
        keep = max(1, t - 2 * r)
        attention[r, keep:] = 0
        ids[r, keep:] = config.pad_token_id
    inputs = {"input_ids": ids, "attention_mask": attention} if mask == "1" else {"input_ids": ids}
    return seeded(lambda: BertModel(config, add_pooling_layer=False)), inputs
