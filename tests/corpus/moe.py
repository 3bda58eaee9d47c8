"""A mixture of experts with top-2 routing: Mixtral (2 layers, hidden 32, 4 experts, 2 per token), its
experts run by transformers' default implementation on the CPU (``experts``: "grouped_mm" sorts the whole
batch's token-expert pairs by expert; "eager" loops over the experts).

``near_tie=E`` sets the first layer's router so that, for row 0's last token, experts 1 and 2 are second and
third by a hair (their logits about 2^-17 apart), with the order between them decided by the part of the router's
input that a relative change of 2^-E in the first attention's output (``o_proj``, the size
``scripts.trace run --perturb-size`` plants) moves most: a planted difference of rounding size at o_proj
then flips which experts that token goes to. The router is built from the model's own activations, so the
flip does not rest on one machine's rounding: its margin is tens of times the rounding of the router's sums."""

import torch
from transformers import MixtralConfig, MixtralForCausalLM

from tests.corpus.common import VOCAB, seeded, token_rows


def make(batch: str = "1", tokens: str = "8", experts: str = "", near_tie: str = ""):
    config = MixtralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                           max_position_embeddings=64, pad_token_id=0, bos_token_id=0, eos_token_id=0,
                           router_jitter_noise=0.0)
    if experts:
        config._experts_implementation = experts
    model = seeded(lambda: MixtralForCausalLM(config))
    ids = token_rows(int(batch), int(tokens))
    if near_tie:
        _near_tie(model, ids[:1], 2.0 ** -int(near_tie))
    return model, (ids,)


def _near_tie(model, row, size: float) -> None:
    layer = model.model.layers[0]
    seen = {}
    keep = layer.post_attention_layernorm.register_forward_hook(lambda m, i, o: seen.__setitem__("n", o[0, -1]))

    def router_input(scale):
        h = layer.self_attn.o_proj.register_forward_hook(lambda m, i, o: o * scale)
        try:
            with torch.no_grad():
                model(row)
        finally:
            h.remove()
        return seen["n"].double()

    try:
        n, moved = router_input(1.0), router_input(torch.tensor(1.0 + size, dtype=torch.float32))
    finally:
        keep.remove()
    rel = (moved - n) / n
    j, k = int(torch.argmax(rel.abs() * (n.abs() > 1e-3))), int(torch.argmin(rel.abs() + (n.abs() <= 1e-3)))
    r = float(rel[j] - rel[k])
    u = n / n.norm()
    base = u / n.norm()  # base . n = 1
    delta = 2.0 ** -17
    gamma = -2 * delta / r  # the planted change moves the gap by -2 delta
    d = torch.zeros_like(n)
    d[j] += (gamma + delta) / n[j]
    d[k] -= gamma / n[k]
    w = torch.stack([2 * base, base, base + d, -base])  # logits 2, 1, 1 + delta, -1 for that token
    with torch.no_grad():
        layer.mlp.gate.weight.copy_(w.float())
