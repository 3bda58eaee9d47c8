"""What one page computes, put together from the packages below.

overview (the Overview page's live numbers), sumlab (Summation lab), cpu_vs_gpu (CPU vs GPU, with replays of
recordings), mitigations (each fix measured on the Mitigations page's inputs) with peak_rates (the cited float64
peak rates), assoc (Non-associativity),
gpu_arithmetic (GPU arithmetic's dot-product lab) with atomics (its scatter-add by atomic additions),
elementwise (exp, log, tanh and sigmoid against
their correctly rounded values: causes other than a sum's order), reproducible (Make my runs reproducible: modelled
GPU generations, tolerances) with reproducible_rules (its registry of settings) and reproducible_costs (each
setting's cost on the hardware named), many_devices (Many devices: its all-reduce studies and emulated trainings,
kept for every visitor, and the rates its waits are estimated from), your_gpu (the visitor's GPU through WebGPU:
the browser's job, the judgement of its report, its recording, the room's tally), talk (the talk's scenarios:
page links with their settings, one seed found by computation on first use).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""
