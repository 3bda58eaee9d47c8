"""A tiny language model served with dynamic batching, and batch-invariant kernels.

Holds: ``corpus`` (the seeded grammar that writes the training text), ``model`` (a
character-level causal transformer with a KV cache, its weights and tokenizer),
``kernels`` (the model's reductions two ways: torch's ordinary ops, and batch-invariant ones
whose result for a row never depends on the batch around it), ``fused`` (the batch-invariant
RMSNorm, softmax and attention as compiled loops) and ``engine`` (a server that
batches whatever requests are waiting, and the measurement of how identical requests fork).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""
