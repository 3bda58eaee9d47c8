"""Training the same model twice and watching the two runs part.

mlp (the 2-64-64-3 MLP, its data, settings and presets), pair (the difference sources and the
paired run that steps A and B from identical weights), measure (snapshots into step records),
seeds (divergence summaries and the seed study), divergence (what the Training divergence page
says about a pair), gloo / gloo_worker / emulate / data_parallel (real torch.distributed runs over
local worker processes, and in-process emulations of many devices).

May import: core.kernels, core.machines, core.arith, torch, NumPy.
"""
