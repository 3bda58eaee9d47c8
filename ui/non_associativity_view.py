"""Text and tables for the Non-associativity page, built from core.studies.assoc's TripleResult (no numerics here)."""

from __future__ import annotations

import math
from fractions import Fraction

from core.arith.exact import abbreviate, exact_decimal, shortest_repr, to_mpf
from core.arith.formats import FLOAT64, Exact, FloatFormat, floor_log2
from core.arith.hexbits import hex_bits
from core.arith.ulps import ulp
from core.studies.assoc import Step, TripleResult
from ui.render import bits_html, mono, ulps_short, ulps_text


def value_line(x: Exact, fmt: FloatFormat) -> str:
    """Every digit of the stored value first, then the shortest decimal that reads back to it when that differs.

    (Otherwise bfloat16's 1e8 reads "stored 100000000 … exactly 100139008": the shortest decimal that rounds
    back looks like the stored value.)"""
    exact, short = exact_decimal(x), shortest_repr(x, fmt)
    if short == exact:
        return f"{mono(exact)} exactly"
    return (f"{mono(abbreviate(exact, 90))} exactly &nbsp; <small>(shortest decimal that reads back to it: "
            f"{mono(short)})</small>")


def stored_html(result: TripleResult) -> str:
    """What each typed number became in the format, with its bits (HTML: typed text goes through mono)."""
    fmt, rows = result.fmt, []
    for name, n, bits in zip("abc", result.numbers, result.stored_bits, strict=True):
        if n.was_rounded:
            note = f"rounded when stored ({result.stored_ulps(n):+.3g} ULP of the typed value)"
        else:
            note = "stored exactly"
        rows.append(
            f"**{name}** typed {mono(n.text)} → stored {value_line(n.stored, fmt)}<br>"
            f"&emsp;{bits_html(bits, fmt)} &nbsp; <small>{hex_bits(bits, fmt)} · {note}</small>"
        )
    return "<br>".join(rows)


def step_html(result: TripleResult, step: Step) -> str:
    """One addition: its exact sum, what it rounded to, and whether (and by how much) it rounded."""
    fmt = result.fmt
    if step.was_exact:
        verdict = "exact, no rounding"
    elif math.isinf(float(step.rounded)):
        verdict = f"**overflowed to {exact_decimal(step.rounded)}**"
    else:
        verdict = (
            # three digits of the rounding's size: its exact digits are the difference of the two lines shown
            f"**rounded here** by {mono(f'{float(step.rounding_error):.3g}')} ({ulps_text(result.step_ulps(step))})"
        )
    return (f"`{step.expression}` exact {mono(abbreviate(exact_decimal(step.exact), 70))}<br>"
            f"&emsp;→ {fmt.name} {mono(shortest_repr(step.rounded, fmt))} · {verdict}")


# Beyond this many ULPs a gap in ULPs says little to a reader (1 and 0 are 1,065,353,216 float32 values
# apart): the difference itself says it.
MEANINGFUL_ULPS = 1024


def apart_text(result: TripleResult) -> str:
    """The two results' gap for a metric: in ULPs when that is a readable count, else as a difference."""
    apart = result.ulps_apart
    if apart is not None and apart <= MEANINGFUL_ULPS:
        return f"{apart:,} ULP"
    diff = abs(Fraction(result.left.result) - Fraction(result.right.result))
    return f"by {float(diff):.3g}"


def error_text(error_ulps: float, value, exact) -> str:
    """A grouping's error for a metric: in ULPs when that is a readable count, else as the difference from
    the exact sum and its share of it (an answer off by 1 read "-8.389e+06 ULP (relati…", cut)."""
    if not math.isfinite(error_ulps) or abs(error_ulps) <= MEANINGFUL_ULPS:
        return ulps_short(error_ulps)
    err = Fraction(value) - Fraction(exact)
    share = f", {float(err / Fraction(exact)):+.0%}" if exact != 0 else ""
    return f"{float(err):+.3g}{share}"


def verdict_text(result: TripleResult) -> str:
    fmt = result.fmt
    if not result.differ:
        return (f"Both groupings give the same {fmt.name} bits for these numbers. Try another "
                "preset, or let the search below find a triple where they differ.")
    apart = result.ulps_apart
    if apart is None:
        gap = "one is not finite"
    else:
        gap = f"{apart:,} representable value{'s' if apart != 1 else ''} apart"
    return (f"The groupings differ in {fmt.name}: {shortest_repr(result.left.result, fmt)} versus "
            f"{shortest_repr(result.right.result, fmt)} ({gap}).")


def exact_html(result: TripleResult) -> str:
    fmt = result.fmt
    return (f"Exact a + b + c of the stored values (an `mpmath.mpf` of {to_mpf(result.exact_sum)._mpf_[3]} bits, "
            f"no rounding): {mono(exact_decimal(result.exact_sum))}<br>"
            f"Correctly rounded to {fmt.name}: {value_line(result.correctly_rounded, fmt)} "
            f"{bits_html(result.correctly_rounded_bits, fmt)}")


def ulp_caption(result: TripleResult) -> str:
    fmt, unit = result.fmt, ulp(result.exact_sum, result.fmt)
    return (f"One ULP at the exact sum in {fmt.name} is 2^{floor_log2(unit)} = "
            f"{shortest_repr(unit, FLOAT64)}; errors on this page are stated in these units.")


def devices_table(result: TripleResult) -> list[dict]:
    """Each device's bits for both groupings, and whether they are the CPU's."""
    fmt = result.fmt
    return [{
        "device": o.device.name,
        "(a + b) + c": hex_bits(o.left_bits, fmt) if o.left_bits is not None else "—",
        "a + (b + c)": hex_bits(o.right_bits, fmt) if o.right_bits is not None else "—",
        "same bits as CPU": "" if o.message else ("yes" if result.agrees_with_cpu(o) else "NO"),
        "note": o.message or o.device.label,
    } for o in result.devices]
