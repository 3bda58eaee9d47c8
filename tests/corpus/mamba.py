"""A state-space model: Mamba (2 layers, hidden 32, state 8), on transformers' sequential CPU path (no
extra kernels)."""

from transformers import MambaConfig, MambaForCausalLM

from tests.corpus.common import VOCAB, seeded, token_rows


def make(batch: str = "1", tokens: str = "8"):
    config = MambaConfig(vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4,
                         pad_token_id=0, bos_token_id=0, eos_token_id=0, use_cache=False)
    return seeded(lambda: MambaForCausalLM(config)), (token_rows(int(batch), int(tokens)),)
