"""Op-by-op traces of a model run, and where two traces part.

record (the dispatch mode that keeps, for every aten op, its module path, shapes, digests of its
input and output bits, an L1 norm, a sample of its output bits and its reduction length K),
reductions (K and the terms of each sampled element for the ops that reduce), files (the trace
file: its declared schema, size cap, reading, writing and uploads), models (the bundled models
and a user's own ``make`` function), align (matching two op sequences that need not be equal),
judge (identical, born here or inherited; a born difference against the rounding envelope of its
op), compare (the per-op table and the one-line answer), pairs (the bundled pairs the page
computes live).

May import: every core package below it (core.diagnose for gamma_K and ULPs, core.training and
core.serving for the bundled models, core.machines for the machine facts). Nothing in core
imports it. ``record``, ``reductions``, ``files`` and ``models`` import only torch, NumPy,
jsonschema and core.machines / core.training.mlp / core.serving.model, so ``python -m scripts.trace
run`` works in a bare GPU image like ``scripts.capture``.
"""
