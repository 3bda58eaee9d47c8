"""The user's own numbers as a vector: pasted text or an uploaded file, each numeral rounded once to storage.

core.arith.loader reads the text, CSV or .npy within its limits; this module rounds what it read to the
storage format once, exactly (``round_numerals``: the decimal text decides a tie that float64 cannot
see), and refuses what no sum can use (NaN, infinities, overflow), with a VectorError a person can act on.
``read_pasted`` is the one parser of pasted numbers, the Summation lab's and the mismatch diagnosis'.
"""

from __future__ import annotations

import decimal

import numpy as np

from core.arith.formats import FORMATS, FloatFormat, get_format, quantum_exponent
from core.arith.loader import (
    MAX_UPLOAD_BYTES,
    NpyWords,
    Numbers,
    check_upload,
    clip,
    errors_as,
    read_column,
    read_npy,
    read_text,
)
from core.arith.vectors import MAX_N, Vector, VectorError, check_choice, check_storage, round_array

MAX_PASTED = 100_000



def _vector(numbers: Numbers, values: np.ndarray, storage: str, what: str) -> Vector:
    """The numbers read by core.arith.loader and ``values``, each rounded to storage once (``round_numerals``):
    finite numerals only, none overflowing."""
    x64, numerals = numbers.values, numbers.numerals
    literal = np.isnan(x64)  # nan, inf and infinity as written; numerals too big for float64 overflow below
    for i in np.flatnonzero(np.isinf(x64)):
        literal[i] = _is_inf_literal(numerals[i])
    _reject_non_finite(x64, numerals, what, literal)
    _reject_overflow(values, numerals, storage, what)
    return Vector(values=values, storage=storage, source=f"{what}: {values.size:,} numbers rounded to {storage}")


def _is_inf_literal(t: str) -> bool:
    return t.lstrip("+-").lower() in ("inf", "infinity")


def _reject_non_finite(x64: np.ndarray, tokens: list[str] | None, what: str, mask: np.ndarray | None = None) -> None:
    bad = np.flatnonzero(~np.isfinite(x64) if mask is None else mask)
    if bad.size:
        shown = ", ".join(f"#{i + 1} ({clip(tokens[i], 20) if tokens is not None else x64[i]})" for i in bad[:5])
        raise VectorError(
            f"{what} contains NaN or infinity at position {shown}"
            f"{' and more' if bad.size > 5 else ''}. Any sum with NaN is NaN and inf swamps every order, "
            "so only finite numbers are accepted."
        )


def _reject_overflow(values: np.ndarray, tokens, storage: str, what: str) -> None:
    bad = np.flatnonzero(np.isinf(values))
    if bad.size:
        shown = ", ".join(f"#{i + 1} ({clip(tokens[i], 20) if tokens is not None else values[i]})" for i in bad[:5])
        fmt = get_format(storage)
        raise VectorError(
            f"{what}: {bad.size:,} number(s) overflow {storage} (largest finite ±{float(fmt.max_finite):.6g}), "
            f"for example {shown}. Choose a wider storage format or smaller numbers."
        )


def round_numerals(numerals, x64: np.ndarray, storage: str) -> np.ndarray:
    """Round decimal text to storage without double rounding through float64.

    float() is correctly rounded to float64. Rounding that again to a narrower format is
    wrong only when the float64 value lies exactly halfway between two storage values (or
    on the overflow threshold) while the text does not; for those few numerals the exact
    decimal value decides the side. ``Decimal`` holds every digit of the text, whatever
    its length, and compares exactly.
    """
    values = round_array(x64, storage)
    if storage == "float64":
        return values
    fmt = get_format(storage)
    ties, half_step = _midpoints(x64, fmt)
    if not ties.any():
        return values
    fixed = values.copy()
    for i in np.flatnonzero(ties):
        mid = float(x64[i])
        try:
            exact = decimal.Decimal(numerals[i])
        except (decimal.InvalidOperation, ValueError):  # cannot happen for text float() accepted
            continue
        if exact == decimal.Decimal(mid):
            continue  # a true tie: ties to even was right
        side = float(half_step[i]) if exact > decimal.Decimal(mid) else -float(half_step[i])
        fixed[i] = round_array(np.array([mid + side]), storage)[0]  # a storage value (or the overflow)
    fixed.setflags(write=False)
    return fixed


def _midpoints(x64: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """Which finite values are exactly halfway between two neighbours in ``fmt`` (with an
    unbounded exponent, so the overflow threshold counts), and half the neighbours' spacing."""
    finite = np.isfinite(x64)
    mag = np.abs(np.where(finite, x64, 0.0))
    half_exp = quantum_exponent(mag, fmt.precision, fmt.emin) - 1
    t = np.ldexp(mag, -half_exp)  # exact: at most p + 1 significant bits above the binary point
    ties = finite & (t == np.floor(t)) & (np.fmod(t, 2.0) == 1.0)
    return ties, np.ldexp(np.ones_like(mag), half_exp)


def read_pasted(text: str, storage: str, *, what: str = "The pasted text", max_chars: int = MAX_UPLOAD_BYTES,
                max_numbers: int = MAX_PASTED, accepted: str = "are accepted",
                error: type[ValueError] = VectorError) -> tuple[Numbers, np.ndarray]:
    """The one parser of pasted numbers, for the lab and the mismatch diagnosis: numbers separated by commas,
    whitespace, semicolons or new lines (core.arith.loader's text) within the caller's limits, and each
    numeral rounded once to ``storage`` (``round_numerals``). ``what`` names the text in messages and
    ``accepted`` ends the one on too many numbers; problems raise the caller's ``error``. NaN and infinities
    are kept: whether they are allowed is the caller's rule."""
    check_choice(storage, FORMATS, "storage format", error)
    with errors_as(error):
        numbers = read_text(text, what, max_chars=max_chars, max_numbers=max_numbers, accepted=accepted)
    return numbers, round_numerals(numbers.numerals, numbers.values, storage)


def parse_pasted(text: str, storage: str) -> Vector:
    """The lab's vector from pasted numbers (``read_pasted``): finite numerals only, none overflowing."""
    numbers, values = read_pasted(text, storage)
    return _vector(numbers, values, storage, "The pasted text")


def parse_upload(name: str, data: bytes, storage: str) -> Vector:
    """A .npy array (1-D, real numbers) or a CSV file (one column, or the first numeric column)."""
    check_storage(storage)
    with errors_as(VectorError):
        check_upload(name, data)
    if name.lower().endswith(".npy"):
        return _parse_npy(name, data, storage)
    if name.lower().endswith((".csv", ".txt")):
        return _parse_csv(name, data, storage)
    raise VectorError(f"{clip(name)}: upload a .csv or .npy file.")


_UNREADABLE_NPY = "{name} is not a readable .npy file (object arrays are not accepted)."
_NPY_WORDS = NpyWords(not_npy=_UNREADABLE_NPY, pickled=_UNREADABLE_NPY, damaged=_UNREADABLE_NPY,
                      not_array="{name} holds no data; a real-number array is needed.",
                      empty="{name} holds an empty array.")


def _parse_npy(name: str, data: bytes, storage: str) -> Vector:
    """A 1-D array of real numbers (core.arith.loader.read_npy), finite, each exact in float64, rounded to
    storage once where its dtype is another."""
    with errors_as(VectorError):
        arr = read_npy(name, data, accept=lambda dt: dt.kind in "fiu", needed="a real-number array is needed.",
                       max_values=MAX_N, ndim=1, words=_NPY_WORDS)
    with np.errstate(over="ignore"):
        x64 = arr.astype(np.float64)
    if arr.dtype.kind == "f":
        _reject_non_finite(arr, None, clip(name))
        if arr.dtype.itemsize > 8 and np.any(x64.astype(arr.dtype) != arr):
            raise VectorError(f"{clip(name)} holds {arr.dtype} values that float64 cannot hold exactly; "
                              "save them as float64 (or narrower).")
    elif not _ints_exact(arr, x64):
        raise VectorError(f"{clip(name)} holds integers too large for exact float64 conversion.")
    note = ()
    if arr.dtype == FORMATS[storage].numpy_dtype:
        values = arr.copy()
        values.setflags(write=False)
    else:
        values = round_array(x64, storage)
        note = (f"{clip(name)} held {arr.dtype}; its values were rounded to {storage}.",)
    _reject_overflow(values, None, storage, clip(name))
    return Vector(values=values, storage=storage, source=f"{name}: {values.size:,} values as {storage}", notes=note)


def _ints_exact(arr: np.ndarray, x64: np.ndarray) -> bool:
    """Whether the float64 values equal the integers (no out-of-range cast is attempted)."""
    info = np.iinfo(arr.dtype)
    in_range = (x64 >= float(info.min)) & (x64 < float(info.max) + 1)  # float(info.max) + 1 is a power of 2
    back = np.where(in_range, x64, 0.0).astype(arr.dtype)
    return bool(np.all(in_range & (back == arr)))


def _parse_csv(name: str, data: bytes, storage: str) -> Vector:
    with errors_as(VectorError):
        numbers = read_column(name, data, max_numbers=MAX_PASTED)
    vec = _vector(numbers, round_numerals(numbers.numerals, numbers.values, storage), storage, clip(name))
    if not numbers.first_column:
        return vec
    return Vector(values=vec.values, storage=storage, source=vec.source + " (first column)", notes=numbers.notes)
