"""Arithmetic foundations: IEEE 754 formats, exact values, errors and bounds, vectors, parsing.

floatformat (FloatFormat and the registry of formats: each one entry with its rules), formats (bits, exact decoding,
correct rounding), ulps (ULPs, errors and distances in ULPs: one convention), hexbits (bit patterns as text: fields
and hex), elementary (exp, log, tanh and sigmoid correctly rounded: the reference for library functions), exact
(exact and correctly rounded sums and dot products, faithful decimal output), buckets (the exact sums' compiled pass
by exponent bucket), shares (pieces of a long pass that threads claim as they come free), numpy_stream (NumPy's
default generator as a recipe the visitor's browser replays bit for bit: PCG64's state, the ziggurat read off
NumPy), metrics (gamma, condition numbers, a-priori and input-rounding bounds by BoundKind, ErrorReport: a result
against its exact value in ULPs and against its bound, UlpText: the one way errors in ULPs are written, the relative
gap, the growth fit), vectors (seeded generators, the vector registry), user_vectors (a visitor's pasted or
uploaded numbers as a vector, each rounded once), parse (typed numbers, exactly), loader (the
one loader of a visitor's numbers, pasted or in a CSV file: its tokeniser, its limits, clip for quoting visitor
text).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""
