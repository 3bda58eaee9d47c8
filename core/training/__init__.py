"""Training the same model twice and watching the two runs part.

mlp (the 2-64-64-3 MLP, its data, settings and presets), optim (torch's optimizers stepped without
loading its compiler), differences (the difference sources: what B changes), pair (the
paired run that steps A and B from identical weights), gap (one step's gap between A and B: its record,
the snapshot a step leaves, and measure, which turns snapshots into records),
seeds (divergence summaries and the seed study), divergence (what the Training divergence page
says about a pair), thinning (which steps a long step chart draws, its spikes and dips kept), data_parallel
(what the data-parallel runs share: settings, one replica, shards, weight digests), gloo (a real
torch.distributed gloo run over local worker processes) with gloo_supervisor (the worker processes started,
followed and torn down) and gloo_worker (what each worker process runs), emulate (many devices emulated in one
process, and the all-reduce order study).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""
