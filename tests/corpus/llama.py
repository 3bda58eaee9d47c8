"""A decoder with rotary embeddings, RMSNorm and grouped-query attention: Llama (2 layers, hidden 64,
4 query heads sharing 2 key-value heads)."""

from transformers import LlamaConfig, LlamaForCausalLM

from tests.corpus.common import VOCAB, seeded, token_rows


def make(batch: str = "1", tokens: str = "16"):
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0,
                         eos_token_id=0, pad_token_id=0)
    return seeded(lambda: LlamaForCausalLM(config)), (token_rows(int(batch), int(tokens)),)
