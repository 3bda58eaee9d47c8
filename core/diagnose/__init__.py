"""Is my mismatch normal? The diagnosis of two results of one computation, and of two loss logs.

verdict (diagnose(): the verdict and its sentence), rounding (formats and rounding of arrays),
results (the result dataclasses), simulate (reordered and reduced-precision sums of the inputs),
envelopes (what rounding can explain, element by element), loaders (a visitor's .npy, .pt and CSV
files, safely), logs (two loss logs: amplified rounding or a jump), examples (bundled, computed live).

May import: core.machines, core.arith, NumPy, torch.
"""
