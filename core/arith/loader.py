"""The one loader of a visitor's numbers: typed or pasted text, uploaded CSV and .npy files, within one set of limits.

* Text: numbers separated by whitespace, commas or semicolons (``tokenise``); the brackets and the
  ``tensor(...)`` / ``array(...)`` wrappers of a printed tensor or array are ignored, so a printed
  tensor pastes as it is.
* A numeral (``is_numeral``) is decimal or scientific notation (``-2.5e-3``, ``.5``, ``5.``), its
  digits optionally grouped by single underscores (``1_000``, as Python writes them), or nan, inf,
  infinity (any case, signed): the forms ``float()`` reads, never evaluated.
* CSV (``csv_rows``): UTF-8 (a byte-order mark is dropped), blank rows skipped, cells stripped; a
  first row that is not all numerals is a header (``split_header``). ``read_column`` reads one column
  (or the first of several, with a note); ``read_table`` reads a rectangular table.
* .npy (``read_npy``): NumPy's own format read with ``allow_pickle=False`` (an object array, which would
  need unpickling, is refused by NumPy itself), after its first bytes show a .npy file (not a .npz
  archive); its dtype, shape and number of values are checked by the caller's rules, each refusal in the
  caller's words (``NpyWords``).

What text and CSV give back is ``Numbers``: the float64 value of every numeral as written (NaN and infinities
kept: whether they are allowed is the caller's rule), the numerals themselves (so a caller can round
the decimal text to a narrower format once, exactly: core.arith.user_vectors.round_numerals), and notes on
what was left out. Every limit is checked before the data is parsed. Problems raise ``LoaderError``;
each caller re-raises it as its own error type with the same message (``errors_as``). Messages quote visitor text
(file names, numerals) through ``clip``: pages show them as inert text.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

# Streamlit's own upload limit is .streamlit/config.toml's maxUploadSize = 5 MB; every page reads at most this.
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
QUOTE_CHARS = 40  # how much of a file name or other visitor text a message quotes
NUMERAL_QUOTE_CHARS = 30  # how much of a numeral that is not one a message quotes

_DIGITS = r"\d(?:_?\d)*"
_NUMERAL = re.compile(
    rf"[+-]?(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?(?:[eE][+-]?{_DIGITS})?|\.{_DIGITS}(?:[eE][+-]?{_DIGITS})?"
    r"|nan|inf|infinity)",
    re.IGNORECASE,
)
_WRAPPERS = re.compile(r"(?i)\b(?:tensor|array)\s*\(|dtype\s*=\s*[\w.]+|device\s*=\s*'?[\w:]+'?|"
                       r"requires_grad\s*=\s*\w+|grad_fn\s*=\s*<[^>]*>|[\[\]()]")
_SEPARATORS = re.compile(r"[\s,;]+")


class LoaderError(ValueError):
    """A visitor's input that cannot be read; ``str(err)`` is the message for the visitor (it may quote
    their text: show it inert)."""


@contextlib.contextmanager
def errors_as(error: type[ValueError]):
    """Run loader calls with a LoaderError raised as the caller's own ``error``, with the same message."""
    try:
        yield
    except LoaderError as err:
        raise error(str(err)) from None


@dataclass(frozen=True, kw_only=True)
class Numbers:
    """What was read: float64 values as written (1-D, or rows × columns from ``read_table``), the numerals
    in reading order, and notes on what was left out."""

    values: np.ndarray = field(repr=False)  # float64, read-only
    numerals: tuple[str, ...] = field(repr=False)
    notes: tuple[str, ...] = ()
    first_column: bool = False  # read_column took the first of several columns


def clip(text, n: int = QUOTE_CHARS) -> str:
    """Visitor text quoted in a message: at most ``n`` characters, a cut marked with an ellipsis."""
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def is_numeral(token: str) -> bool:
    return _NUMERAL.fullmatch(token) is not None


def tokenise(text: str) -> list[str]:
    """The pieces of ``text`` that should be numerals (see the module docstring)."""
    return [t for t in _SEPARATORS.split(_WRAPPERS.sub(" ", text)) if t]


def significant_digits(numeral: str) -> int | None:
    """Significant decimal digits written in a numeral (None for nan / inf)."""
    t = numeral.lower().lstrip("+-").replace("_", "")
    if t in ("nan", "inf", "infinity"):
        return None
    return max(len(t.split("e")[0].replace(".", "").lstrip("0")), 1)


# ------------------------------------------------------------------------------ limits


def check_upload(name: str, data: bytes) -> None:
    """An upload's size, before anything is decoded."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise LoaderError(f"{clip(name)} is {len(data):,} bytes; at most {MAX_UPLOAD_BYTES:,} bytes are accepted.")
    if not data:
        raise LoaderError(f"{clip(name)} is empty.")


def check_length(text: str, what: str, limit: int) -> None:
    """Text's length, before it is split."""
    if len(text) > limit:
        raise LoaderError(f"{what} is {len(text):,} characters long; at most {limit:,} are accepted.")


def check_values(name: str, n: int, limit: int, empty: str = "{name} holds no values.") -> None:
    """How many values a file holds (an array's or a table's), before they are read; ``empty``: the message
    for none (``{name}``: the file name, clipped)."""
    if n > limit:
        raise LoaderError(f"{clip(name)} holds {n:,} values; at most {limit:,} are accepted.")
    if n == 0:
        raise LoaderError(empty.format(name=clip(name)))


# ------------------------------------------------------------------------------ text


def read_numerals(numerals: list[str], what: str, *, max_numbers: int, accepted: str = "are accepted") -> Numbers:
    """The float64 values of ``numerals``; ``what`` names them in messages, and ``accepted`` ends the
    message on too many ("at most N are accepted")."""
    if not numerals:
        raise LoaderError(f"{what} holds no numbers. Paste numbers separated by commas, spaces or new lines.")
    if len(numerals) > max_numbers:
        raise LoaderError(f"{what} holds {len(numerals):,} numbers; at most {max_numbers:,} {accepted}.")
    bad = next((t for t in numerals if not is_numeral(t)), None)
    if bad is not None:
        raise LoaderError(f"{what}: “{clip(bad, NUMERAL_QUOTE_CHARS)}” is not a number.")
    values = np.array([float(t) for t in numerals], dtype=np.float64)
    values.setflags(write=False)
    return Numbers(values=values, numerals=tuple(numerals))


def read_text(text: str, what: str, *, max_chars: int, max_numbers: int, accepted: str = "are accepted") -> Numbers:
    """Typed or pasted numbers (see the module docstring), length checked before splitting."""
    check_length(text, what, max_chars)
    return read_numerals(tokenise(text), what, max_numbers=max_numbers, accepted=accepted)


# ------------------------------------------------------------------------------ CSV


def csv_rows(name: str, data: bytes) -> list[list[str]]:
    """The non-blank rows of a CSV file, each cell stripped."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LoaderError(f"{clip(name)} is not UTF-8 text; save the CSV as UTF-8.") from None
    try:
        return [[c.strip() for c in r] for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    except csv.Error as err:
        raise LoaderError(f"{clip(name)} is not a readable CSV file ({clip(err, 60)}).") from None


def split_header(rows: list[list[str]]) -> tuple[list[str] | None, list[list[str]]]:
    """(header, rows): a first row with a cell that is not a numeral is a header."""
    if rows and not all(is_numeral(c) for c in rows[0] if c):
        return rows[0], rows[1:]
    return None, rows


def read_column(name: str, data: bytes, *, max_numbers: int) -> Numbers:
    """A column of numbers (one row of them also counts); of several columns the first, with a note."""
    who = clip(name)
    rows = csv_rows(name, data)
    if not rows:
        raise LoaderError(f"{who} holds no rows.")
    _, rows = split_header(rows)
    if not rows:
        raise LoaderError(f"{who} holds only a header row.")
    width = max(len(r) for r in rows)
    if width == 1 or len(rows) == 1:
        return read_numerals([c for r in rows for c in r if c], who, max_numbers=max_numbers)
    numbers = read_numerals([r[0] for r in rows if r and r[0]], who, max_numbers=max_numbers)
    return replace(numbers, notes=(f"{who} has {width} columns; the first column was used.",), first_column=True)


def read_table(name: str, data: bytes, *, max_values: int) -> Numbers:
    """A rectangular table of numbers: a 1-D array when it has one row or one column, else rows × columns."""
    who = clip(name)
    _, rows = split_header(csv_rows(name, data))
    if not rows:
        raise LoaderError(f"{who} holds no rows of numbers.")
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise LoaderError(f"{who}: the rows have different numbers of columns; a rectangular table is needed.")
    check_values(name, width * len(rows), max_values)
    numbers = read_numerals([c for r in rows for c in r], who, max_numbers=max_values)
    shape = (len(rows) * width,) if width == 1 or len(rows) == 1 else (len(rows), width)
    values = numbers.values.reshape(shape)
    values.setflags(write=False)
    return replace(numbers, values=values)


# ------------------------------------------------------------------------------ .npy

NPY_MAGIC = b"\x93NUMPY"  # the first six bytes of every .npy file (NumPy's format specification, NEP 1)
ZIP_MAGIC = b"PK\x03\x04"  # a .npz archive (a zip file), which np.load would open lazily instead of an array


@dataclass(frozen=True, kw_only=True)
class NpyWords:
    """How a caller words each refusal of ``read_npy`` that is not about the array's dtype, shape or number of
    values: templates with ``{name}``, the file name (clipped)."""

    not_npy: str  # no .npy header
    pickled: str  # an object array, which would need unpickling
    damaged: str  # a .npy header, then a header or data NumPy cannot read
    not_array: str  # a .npz archive
    empty: str = "{name} holds no values."


def read_npy(name: str, data: bytes, *, accept: Callable[[np.dtype], bool], needed: str, max_values: int,
             words: NpyWords, ndim: int | None = None) -> np.ndarray:
    """The array of a .npy file, read without unpickling (``allow_pickle=False``), checked in this order: a
    .npy header (a zip archive is no single array), readable data, a dtype ``accept`` takes (else "{name}
    holds {dtype} data; " + ``needed``), ``ndim`` dimensions when given, and at most ``max_values`` values,
    at least one. The upload's size is the caller's to check first (``check_upload``)."""
    who = clip(name)
    if data.startswith(ZIP_MAGIC):
        raise LoaderError(words.not_array.format(name=who))
    if not data.startswith(NPY_MAGIC):
        raise LoaderError(words.not_npy.format(name=who))
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as err:
        if "pickle" in str(err).lower():  # NumPy: "Object arrays cannot be loaded when allow_pickle=False"
            raise LoaderError(words.pickled.format(name=who)) from None
        raise LoaderError(words.damaged.format(name=who)) from None
    except Exception:  # numpy raises several kinds (EOFError, OSError, SyntaxError) for a damaged header or body
        raise LoaderError(words.damaged.format(name=who)) from None
    if not accept(arr.dtype):
        raise LoaderError(f"{who} holds {arr.dtype} data; {needed}")
    if ndim is not None and arr.ndim != ndim:
        raise LoaderError(f"{who} has shape {arr.shape}; a {ndim}-D array is needed.")
    check_values(name, arr.size, max_values, empty=words.empty)
    return arr

