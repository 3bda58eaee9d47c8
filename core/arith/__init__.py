"""Arithmetic foundations: IEEE 754 formats, exact values, errors and bounds, vectors, parsing.

formats (FloatFormat, exact decoding, correct rounding, ULPs), exact (exact and correctly rounded
sums and dot products, faithful decimal output), metrics (errors in ULPs, condition numbers,
a-priori bounds), vectors (seeded generators, the vector registry), parse (typed numbers, exactly).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""
