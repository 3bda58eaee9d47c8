"""A tiny language model served with dynamic batching, and batch-invariant kernels.

Holds: ``corpus`` (the seeded grammar that writes the training text), ``model`` (a
character-level causal transformer with a KV cache, its weights and tokenizer),
``kernels`` (the model's reductions two ways: torch's ordinary ops, and batch-invariant ones
whose result for a row never depends on the batch around it) and ``engine`` (a server that
batches whatever requests are waiting, and the measurement of how identical requests fork).

May import: the standard library, torch, numpy and core's arithmetic-level helpers
(``core.formats``, ``core.globalstate``, ``core.devices``). Never streamlit, ``ui`` or ``pages``.
(While core/ is being moved into packages these are imported from their flat paths.)
"""
