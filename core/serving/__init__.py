"""A tiny language model served with dynamic batching, and batch-invariant kernels.

Holds: ``corpus`` (the seeded grammar that writes the training text), ``model`` (a
character-level causal transformer with a KV cache, its weights and tokenizer),
``kernels`` (the model's reductions two ways: torch's ordinary ops, and batch-invariant ones
whose result for a row never depends on the batch around it) and ``engine`` (a server that
batches whatever requests are waiting, and the measurement of how identical requests fork).

May import: the standard library, torch, numpy, core's arithmetic and machine helpers
(``core.arith``, ``core.machines``: formats, the global-state lock) and ``core.crowd.budget``
(the cost of a serving run). Never streamlit, ``ui`` or ``pages``. It sits beside ``core.studies``
in .importlinter's layers, so only the layer above (``core.traces``, which traces this model's
decode step) imports it from outside.
"""
