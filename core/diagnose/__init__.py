"""Is my mismatch normal? The diagnosis of two results of one computation, and of two loss logs.

Bottom to top: rounding (the reduced formats and the accumulation format of each), inputs
(the operands behind the results and their exact terms), tolerances (recommended tolerances, allclose
reports), results (the result dataclasses), simulate (the inputs re-summed in several orders and in
reduced precision), envelopes (what rounding can explain, element by element: envelopes, scale, pattern
check, with the notation and derivations), measure (the two results checked and measured element by
element: every difference and the scale it is measured against), accuracy (both results judged against
a reference, given or the exact result of the inputs: neither side is the reference), verdict
(diagnose(): the verdict, its sentence and reasons), evidence (what the page shows of a diagnosis:
medians, log histograms, ULP sizes, outlier positions);
loaders (a visitor's .npy, .pt and CSV files, safely), logs (two loss logs: amplified rounding or a
jump), examples (bundled, computed live).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""
