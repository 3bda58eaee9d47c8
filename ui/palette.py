"""Every colour the app draws with, named once by what it shows.

A colour's value is written here and nowhere else in ui/, pages/ or app.py (tests/test_palette.py
fails on a colour literal anywhere else); Streamlit's theme stays in .streamlit/config.toml. The
hues come first, each written once; the names the views use say what a colour means, so one hue
may carry several meanings (the blue of a float's mantissa bits is also the blue of a live result).
"""

from __future__ import annotations

# ------------------------------------------------------------------------------- the hues
_BLUE = "#1f5fa8"
_AMBER = "#d97706"
_GREEN = "#1e8449"
_RED = "#c0392b"
_DARK_RED = "#b91c1c"
_VIOLET = "#7c3aed"
_GREY = "#6b7280"
_LIGHT_GREY = "#9ca3af"
_DARK_GREY = "#374151"
_INK = "#111827"
_BLACK = "#000000"
_WHITE = "#fff"
_WHITE_VEIL = "#ffffffd0"  # white, slightly see-through: a legend box over lines
# Tailwind CSS 600 shades, for series that only need to differ from one another
_BLUE_600, _RED_600, _GREEN_600, _PURPLE_600 = "#2563eb", "#dc2626", "#16a34a", "#9333ea"
_ORANGE_600, _CYAN_600, _YELLOW_600, _PINK_600 = "#ea580c", "#0891b2", "#ca8a04", "#db2777"
_ORANGE_700 = "#c2410c"
_PALE_BLUE = "rgba(28,131,225,0.13)"
# Okabe and Ito's colour-blind-safe palette (https://jfly.uni-koeln.de/color/)
_OKABE_BLUE, _OKABE_ORANGE = "#0072B2", "#E69F00"
_OKABE_REDDISH_PURPLE, _OKABE_BLUISH_GREEN = "#CC79A7", "#009E73"
# Tableau 10 and D3's category 10, for the traces' states
_TAB_GREY, _TAB_ORANGE, _TAB_BLUE, _TAB_GREEN = "#b8c2cc", "#f28e2b", "#4e79a7", "#59a14f"
_D3_RED, _D3_BROWN, _D3_PURPLE = "#d62728", "#8c564b", "#9467bd"

# --------------------------------------------------------------------- a float's three fields
SIGN_BIT = _RED
EXPONENT_BITS = _GREEN
MANTISSA_BITS = _BLUE

# ------------------------------------------- where a result came from (core.kernels.orders' ORIGIN_*)
LIVE = _BLUE  # the real library ran on this machine
MODEL = _AMBER  # our reimplementation of a library's or a device's order
ALGORITHM = _GREY  # a textbook order computed here in the working dtype
EXACT = _GREEN  # the exact value
ORIGINS = {"live": LIVE, "model": MODEL, "algorithm": ALGORITHM, "exact": EXACT}

# ------------------------------------------------------------------- two runs of one training
# A blue, B orange (Okabe-Ito); B is dashed as well, so the two read apart in grey print and for
# every kind of colour vision.
RUN_A = _OKABE_BLUE
RUN_B = _OKABE_ORANGE
LOSS_GAP = _OKABE_REDDISH_PURPLE  # |Δ loss| between A and B
WEIGHT_GAP = _OKABE_BLUISH_GREEN  # ‖Δθ‖ between A and B
FIT = _INK  # a fitted growth line over the gaps
PARTING = _D3_RED  # the step where two runs part
DIFFERING_BITS = _RED  # the share of parameter bits where A and B differ
FLOAT32_PAIR = _RED  # a pair trained in float32, beside...
FLOAT64_PAIR = _GREEN  # ...the same pair in float64
# two runs in a visitor's logs (Diagnose a mismatch)
LOG_RUNS = [_BLUE, _AMBER]
LOG_GAP = [_DARK_RED, _LIGHT_GREY, _BLUE]  # the relative gap, the size of a rounding, the fitted growth
LOG_MARKS = [_GREY, _BLACK]  # the first difference, a jump

# ----------------------------------------------------------------------- context and notes
CONTEXT = _LIGHT_GREY  # the many in the background (histogram bars, a tree's edges) behind what is marked
REFERENCE = _GREY  # a reference line (the 1% line)
NOTE = _DARK_GREY  # text written on a chart
OUTLINE = _INK  # a thin stroke around dots
LEGEND_FILL = _WHITE_VEIL

# ------------------------------------------------------------------- series told apart by hue
CLASSES = [_BLUE_600, _RED_600, _GREEN_600, _PURPLE_600, _ORANGE_600, _CYAN_600, _YELLOW_600, _PINK_600]
DEVICE_RUNS = [_BLUE, _AMBER, _GREEN_600, _PURPLE_600, _RED_600, _CYAN_600]  # one per number of devices
COLLECTIVE_COLOURS = [_BLUE, _CYAN_600, _AMBER, _GREEN_600]  # core.kernels.collectives.COLLECTIVE_MODELS, in order
# the tolerance envelopes of Diagnose a mismatch, in the order they are drawn
ENVELOPES = [_GREEN, _BLUE, _VIOLET, _AMBER, _DARK_RED]
# Diagnose's simulation: the simulated orders, the visitor's differences, the reduced-precision inputs
SIMULATION = [_LIGHT_GREY, _DARK_RED, _VIOLET]
ATOMICS = [_LIGHT_GREY, _BLUE]  # the bucket sums' sources (GPU arithmetic), in the chart's domain order
# the traces' timeline states, in core.traces.pairs.STATE_ORDER
TRACE_STATES = (_TAB_GREY, _TAB_ORANGE, _D3_RED, _TAB_BLUE, _TAB_GREEN, _D3_BROWN, _D3_PURPLE)

# ------------------------------------------------------------------------ a served completion
FORK = _ORANGE_700  # the first character that departs from the request served alone, and the rest
ON_FORK = _WHITE  # text on the fork's box
GENERATED_BACKGROUND = _PALE_BLUE  # generated text, apart from the prompt
# A QR code: black modules on white, the contrast every phone camera reads
QR_DARK, QR_LIGHT = _BLACK, _WHITE
