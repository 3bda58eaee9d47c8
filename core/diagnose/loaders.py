"""Reading a visitor's tensors and loss logs for the mismatch diagnosis, safely and within limits.

* ``.npy``: core.arith.loader.read_npy (``numpy.load(allow_pickle=False)``: object arrays, which would
  need unpickling, are refused by NumPy itself), float16, float32 or float64 of any shape.
* ``.pt`` / ``.pth``: only PyTorch's zip format, checked with ``zipfile`` first (every entry
  stored uncompressed, so nothing expands beyond the upload's size), then
  ``torch.load(weights_only=True, map_location="cpu")``: PyTorch's restricted unpickler,
  which builds tensors and plain containers only and never imports or calls arbitrary code.
* ``.csv`` / ``.txt`` and pasted text: read by core.arith.loader (the one loader of a visitor's
  numbers, its tokeniser and limits; a printed tensor pastes as it is; pasted text through
  core.arith.user_vectors.read_pasted, the Summation lab's parser too), then rounded to the chosen format once.
  NaN and inf are kept: they are part of what is compared.

Every limit is checked before the data is parsed. Error messages may quote a file name or
pasted text: pages show them as inert text.
"""

from __future__ import annotations

import io
import math
import zipfile
from dataclasses import dataclass

import numpy as np
import torch

from core.arith.exact import shortest_repr
from core.arith.formats import FORMATS, NUMPY_DTYPES, to_numpy
from core.arith.loader import MAX_UPLOAD_BYTES as MAX_UPLOAD_BYTES  # pages/diagnose.py reads it from here
from core.arith.loader import (
    NpyWords,
    Numbers,
    check_length,
    check_upload,
    check_values,
    clip,
    csv_rows,
    errors_as,
    is_numeral,
    read_npy,
    read_table,
    significant_digits,
    split_header,
)
from core.arith.user_vectors import read_pasted, round_numerals
from core.diagnose.inputs import MAX_INPUT_ELEMENTS, Inputs
from core.diagnose.measure import MAX_ELEMENTS

MAX_PASTE_CHARS = 100_000
MAX_PASTED_NUMBERS = 10_000
MAX_LOG_ROWS = 100_000
ARRAY_TYPES = ("npy", "pt", "pth", "csv", "txt")
LOG_TYPES = ("csv", "txt")
_TORCH_FORMATS = {f.torch_dtype: name for name, f in FORMATS.items()}


class LoadError(ValueError):
    """Input that cannot be used; ``str(err)`` is the message for the visitor."""


@dataclass(frozen=True, kw_only=True)
class Loaded:
    values: np.ndarray  # in its own format (bfloat16 as ml_dtypes.bfloat16)
    fmt: str
    source: str  # what was read, for the page (may contain the file name: show inert)
    notes: tuple[str, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)


def _check_elements(name: str, n: int, limit: int) -> None:
    with errors_as(LoadError):
        check_values(name, n, limit)


def load_array(name: str, data: bytes, text_format: str = "float32", limit: int = MAX_ELEMENTS) -> Loaded:
    """A tensor from an uploaded file (see the module docstring); LoadError with the reason."""
    with errors_as(LoadError):
        check_upload(name, data)
    low = name.lower()
    if low.endswith(".npy"):
        return _load_npy(name, data, limit)
    if low.endswith((".pt", ".pth")):
        return _load_torch(name, data, limit)
    if low.endswith((".csv", ".txt")):
        return _load_csv(name, data, text_format, limit)
    raise LoadError(f"{clip(name)}: upload a .npy, .pt, .pth or .csv file.")


def load_input(name: str, data: bytes, text_format: str = "float32") -> Loaded:
    """An operand (factor or summed array): the same formats, with the operands' size limit."""
    return load_array(name, data, text_format, MAX_INPUT_ELEMENTS)


def load_reference(name: str, data: bytes, text_format: str = "float64") -> Loaded:
    """A reference for both results (e.g. the computation in float64): the same formats, with CSV text
    read in float64 whatever the results' format (a reference rounded to theirs would judge nothing)."""
    return load_array(name, data, "float64")


# Each refusal of a .npy file gives the real reason (a file of random bytes was once refused as an object array).
_NOT_NPY = ("{name} is not a .npy file: it does not start with the .npy header (the bytes \\x93NUMPY that np.save "
            "writes first). Save the array with np.save, or upload it as .pt or .csv.")
_NPY_WORDS = NpyWords(
    not_npy=_NOT_NPY,
    pickled="{name} holds an object array, which would need unpickling: not accepted. Save a numeric array (e.g. "
    "np.save(path, t.cpu().numpy())).",
    damaged="{name} starts like a .npy file but its header or data is damaged or cut short.",
    not_array=_NOT_NPY,  # a .npz archive starts with a zip header, not the .npy one
)
_NPY_FORMATS = {np.dtype(np.float16): "float16", np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


def _load_npy(name: str, data: bytes, limit: int) -> Loaded:
    """A float16, float32 or float64 array of any shape (core.arith.loader.read_npy), as stored."""
    with errors_as(LoadError):
        arr = read_npy(name, data, accept=lambda dt: dt in _NPY_FORMATS, max_values=limit, words=_NPY_WORDS,
                       needed="a float16, float32 or float64 array is needed (save bfloat16 tensors as .pt, or "
                       "convert them to float32, which is exact).")
    fmt = _NPY_FORMATS[arr.dtype]
    return Loaded(values=np.ascontiguousarray(arr), fmt=fmt, source=f"{name}: {fmt}, shape {tuple(arr.shape)}")


def _load_torch(name: str, data: bytes, limit: int) -> Loaded:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
    except zipfile.BadZipFile:
        raise LoadError(f"{clip(name)} is not in PyTorch's zip format (torch.save's default since 1.6); only that "
                        "format is read.") from None
    if any(i.compress_type != zipfile.ZIP_STORED for i in infos) or sum(i.file_size for i in infos) > 2 * len(data):
        raise LoadError(f"{clip(name)} holds compressed entries; torch.save never writes those, so it is refused.")
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # the restricted unpickler refuses anything but tensors and plain containers
        raise LoadError(f"{clip(name)} could not be read with torch.load(weights_only=True): "
                        f"{clip(type(err).__name__, 30)}. Save a tensor (or a dict holding one) with torch.save.") \
            from None
    tensors = _tensors_in(obj)
    if not tensors:
        raise LoadError(f"{clip(name)} holds no tensor.")
    if len(tensors) > 1:
        keys = ", ".join(clip(k, 20) for k, _ in tensors[:5])
        raise LoadError(f"{clip(name)} holds {len(tensors)} tensors ({keys}{', …' if len(tensors) > 5 else ''}); "
                        "save just the one to compare.")
    key, t = tensors[0]
    if t.layout != torch.strided:
        raise LoadError(f"{clip(name)} holds a {t.layout} tensor; save a dense one (t.to_dense()).")
    fmt = _TORCH_FORMATS.get(t.dtype)
    if fmt is None:
        raise LoadError(f"{clip(name)} holds a {t.dtype} tensor; float16, bfloat16, float32 or float64 is needed.")
    _check_elements(name, t.numel(), limit)
    t = t.detach().contiguous()
    values = to_numpy(t)
    where = f" (entry {clip(key, 20)})" if key else ""
    return Loaded(values=values.copy(), fmt=fmt, source=f"{name}{where}: {fmt}, shape {tuple(t.shape)}")


def _tensors_in(obj, prefix: str = "", depth: int = 0) -> list[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj)]
    if depth > 3:
        return []
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _tensors_in(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            out += _tensors_in(v, f"{prefix}[{i}]", depth + 1)
    return out


# ------------------------------------------------------------------------------ text


def _notes(numbers: Numbers, values: np.ndarray, fmt: str, what: str) -> tuple[str, ...]:
    """Notes on what the text could not say, given ``values``: its numerals each rounded once to ``fmt``."""
    numerals, x64, values = numbers.numerals, numbers.values.reshape(-1), values.reshape(-1)
    notes = []
    digits = [d for d in (significant_digits(t) for t in numerals) if d is not None]
    need = FORMATS[fmt].decimal_digits
    if digits and max(digits) < need:
        notes.append(f"{what} has at most {max(digits)} significant digits; {fmt} needs {need} to pin a value down. "
                     "Differences below the last printed digit are invisible, and the printing itself rounded each "
                     "value (print with torch.set_printoptions(precision=10), or upload the tensors).")
    # a numeral written with more than the format holds: the nearest value of the format, printed with the
    # numeral's own digit count, reads otherwise (3.0000001 as float32 is 3). A numeral printed from the
    # format itself ("0.1", or float32's nine digits) reads back the same and gets no note.
    moved = [(t, v) for t, v, x in zip(numerals, values.tolist(), x64.tolist(), strict=True)
             if math.isfinite(x) and math.isfinite(v) and (d := significant_digits(t))
             and f"{v:.{d}g}" != f"{x:.{d}g}"]
    if moved:
        t, v = moved[0]
        notes.append(f"{what}: {len(moved):,} number(s) hold more digits than {fmt} keeps and were rounded to the "
                     f"nearest {fmt} value when read (“{clip(t, 30)}” became {shortest_repr(v, FORMATS[fmt])}); "
                     "what is compared is the rounded values.")
    overflow = int(np.sum(np.isinf(values) & np.isfinite(x64)))
    if overflow:
        notes.append(f"{what}: {overflow:,} number(s) overflow {fmt} and became ±inf.")
    return tuple(notes)


def load_pasted(text: str, fmt: str, what: str = "The pasted text") -> Loaded:
    """A 1-D array from pasted numbers (core.arith.user_vectors.read_pasted, within this page's limits)."""
    if fmt not in NUMPY_DTYPES:
        raise LoadError(f"unknown format {fmt!r}")
    numbers, values = read_pasted(text, fmt, what=what, max_chars=MAX_PASTE_CHARS, max_numbers=MAX_PASTED_NUMBERS,
                                  accepted="can be pasted (upload a file for more)", error=LoadError)
    notes = _notes(numbers, values, fmt, what)
    return Loaded(values=values, fmt=fmt, source=f"{what}: {values.size:,} numbers as {fmt}", notes=notes)


def _load_csv(name: str, data: bytes, fmt: str, limit: int) -> Loaded:
    with errors_as(LoadError):
        numbers = read_table(name, data, max_values=limit)
    values = round_numerals(numbers.numerals, numbers.values.reshape(-1), fmt).reshape(numbers.values.shape)
    notes = _notes(numbers, values, fmt, clip(name))
    return Loaded(values=values, fmt=fmt, source=f"{name}: {fmt} from text, shape {values.shape}", notes=notes)


# ------------------------------------------------------------------------------ logs


@dataclass(frozen=True, kw_only=True)
class LossLog:
    steps: np.ndarray  # int64, strictly increasing
    values: np.ndarray  # float64 as written
    resolution: np.ndarray  # half a unit in the last written digit, per value (0 for full precision)
    source: str
    notes: tuple[str, ...] = ()


def _resolution(token: str) -> float:
    t = token.lower().lstrip("+-").replace("_", "")
    if t in ("nan", "inf", "infinity"):
        return 0.0
    mant, _, exp = t.partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    return 0.5 * 10.0 ** (int(exp or 0) - decimals)


def parse_log(name: str, data: bytes | str) -> LossLog:
    """A loss log: TensorBoard's CSV export (Wall time, Step, Value), ``step,value`` rows, or one
    value per line (steps 1, 2, ...). Columns are found by their header names when there is one."""
    with errors_as(LoadError):
        if isinstance(data, str):
            check_length(data, name, MAX_PASTE_CHARS * 10)
            data = data.encode()
        else:
            check_upload(name, data)
        rows = csv_rows(name, data)
    if not rows:
        raise LoadError(f"{clip(name)} holds no rows.")
    header, rows = split_header(rows)
    header = None if header is None else [c.lower() for c in header]
    if not rows:
        raise LoadError(f"{clip(name)} holds only a header row.")
    if len(rows) > MAX_LOG_ROWS:
        raise LoadError(f"{clip(name)} holds {len(rows):,} rows; at most {MAX_LOG_ROWS:,} are accepted.")
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise LoadError(f"{clip(name)}: the rows have different numbers of columns.")
    step_col, value_col = _log_columns(name, header, width)
    for r in rows:
        for c in ((step_col, value_col) if step_col is not None else (value_col,)):
            if not is_numeral(r[c]):
                raise LoadError(f"{clip(name)}: “{clip(r[c], 30)}” is not a number.")
    values = np.array([float(r[value_col]) for r in rows])
    resolution = np.array([_resolution(r[value_col]) for r in rows])
    if step_col is None:
        steps = np.arange(1, len(rows) + 1, dtype=np.int64)
    else:
        s = np.array([float(r[step_col]) for r in rows])
        if not np.all(np.isfinite(s)) or np.any(s != np.round(s)) or np.any(np.abs(s) > 2**53):
            raise LoadError(f"{clip(name)}: the steps must be whole numbers.")
        steps = s.astype(np.int64)
        if np.any(np.diff(steps) <= 0):
            raise LoadError(f"{clip(name)}: the steps must increase from row to row.")
    return LossLog(steps=steps, values=values, resolution=resolution, source=f"{name}: {len(rows):,} steps")


def _log_columns(name: str, header: list[str] | None, width: int) -> tuple[int | None, int]:
    if header is not None:
        step = next((i for i, h in enumerate(header) if h in ("step", "steps", "iteration", "iter", "global_step")),
                    None)
        value = next((i for i, h in enumerate(header) if h in ("value", "loss", "train_loss", "train/loss")), None)
        if value is None:
            value = width - 1
        return step, value
    if width == 1:
        return None, 0
    if width == 2:
        return 0, 1
    if width == 3:
        return 1, 2  # TensorBoard: wall time, step, value
    raise LoadError(f"{clip(name)} has {width} columns and no header; give a Step and a Value column.")



# --------------------------------------------------------------------------- the page's settings and checks


@dataclass(frozen=True, kw_only=True)
class DiagnoseSettings:
    """What the Diagnose page was asked: where the data come from, whether reduced precision may
    explain the difference, K (None: unknown) and the format the computation ran in ("auto": the
    arrays' own, float32 for text)."""

    source: str = "example"
    reduced: bool = True
    k: int | None = None
    format_choice: str = "auto"

    @property
    def reduced_precision(self) -> str:
        """core.diagnose.verdict.diagnose's reduced_precision: "any" or "none"."""
        return "any" if self.reduced else "none"

    @property
    def fmt(self) -> str | None:
        """The format to diagnose in, None to take the arrays' own."""
        return None if self.format_choice == "auto" else self.format_choice

    @property
    def text_format(self) -> str:
        """The format typed or pasted numbers are read in."""
        return self.fmt or "float32"


def pair_problem(actual: Loaded, expected: Loaded, pasted: bool = False) -> str | None:
    """Why two results (result A and result B) cannot be compared element for element (None when they can)."""
    if pasted:
        if actual.shape != expected.shape:
            return (f"Result A holds {actual.values.size:,} numbers but result B holds {expected.values.size:,}: "
                    "they must match one for one.")
        return None
    if actual.fmt != expected.fmt:
        return (f"Result A is {actual.fmt} but result B is {expected.fmt}: upload both in one dtype. A narrower "
                "tensor converts to a wider one exactly (t.float(), t.double()); then choose the narrower "
                "format above as the one the computation ran in.")
    if actual.shape != expected.shape:
        return (f"Result A has shape {actual.shape} but result B has shape {expected.shape}: they must match "
                "element for element.")
    return None


def reference_problem(reference: Loaded, result: Loaded, pasted: bool = False) -> str | None:
    """Why a reference cannot judge the results element for element (None when it can)."""
    if pasted and reference.values.size != result.values.size:
        return (f"The reference holds {reference.values.size:,} numbers but the results hold "
                f"{result.values.size:,}: they must match one for one.")
    if not pasted and reference.shape != result.shape:
        return (f"The reference has shape {reference.shape} but the results have shape {result.shape}: they must "
                "match element for element.")
    return None


def reduction_length_problem(k: int | None, inputs: Inputs | None) -> str | None:
    """Why a given K contradicts the inputs (None when it does not, or either is unknown)."""
    if k is not None and inputs is not None and inputs.k != k:
        return f"K = {k:,}, but the inputs sum {inputs.k:,} terms per element."
    return None
