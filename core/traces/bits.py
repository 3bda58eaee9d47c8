"""What a trace keeps of one tensor's bits: the digest of its bytes in row-major order, sampled values as hex
bits, and its L1 norm in float64 (core.traces.record calls these for every input and output of every op).

Where the tensor is one NumPy reads as it is (a dense CPU tensor of a float, integer or boolean dtype),
its followed rows are cut and flattened in NumPy (``rows_values``) and the digest, samples and L1 norm read
that one array; others (bfloat16, complex, quantized, another device, lazy negation) go through torch
(``flat_values``). A complex value is its real and imaginary parts: its sample is the hex bits of both, one
after the other (``COMPONENTS`` names the parts' format), and its L1 norm sums |re| + |im|. A quantized
tensor is its integer levels (``int_repr``), sampled as integers, and its digest also covers its scales and
zero points (``quant_params``): two tensors of the same levels on other grids hold other values.
Both give the same bits, so the same digests, samples and norms. A trace makes these per op, so the fixed
cost of each call counts: float samples' text is made in one conversion per format when the trace ends
(``sample_text`` with ``pending``, then ``write_samples``).

What holds no bits worth keeping: memory allocated without data (``torch.empty`` and its kin) holds what the
allocator left there, different from run to run. ``UninitialisedMemory`` follows which bytes of it ops have written
(``Allocation``); a tensor none of whose bytes were written is digested as ``UNINITIALISED`` (its bytes are not read).
"""

from __future__ import annotations

import functools
import math
import weakref

import numpy as np
import torch
import xxhash

from core.arith.formats import FORMATS, bit_view, byte_view, format_of, to_numpy
from core.arith.hexbits import hex_digits

SAMPLE = 32  # output values kept per op, as hex bits
# what digest() computes (earlier files: "blake2b-64" in version 1, then "sha256-64"); traces of two cannot be compared
DIGEST = "xxh3-64"
DTYPE_NAMES = {f.torch_dtype: name for name, f in FORMATS.items()}  # every stored format, FP8 included
_FORMATS = {dt: format_of(dt) for dt in DTYPE_NAMES}  # looked up per sampled output
_VIA_ML_DTYPES = frozenset(dt for dt, f in _FORMATS.items() if not f.native_numpy)  # torch hands NumPy none of these
# a complex format's parts: each value is sampled as the bits of its real part, then its imaginary part
COMPONENTS = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}
_PARTS = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}


def dtype_name(dt: torch.dtype) -> str:
    return DTYPE_NAMES.get(dt) or str(dt).removeprefix("torch.")


def _cpu(t: torch.Tensor) -> torch.Tensor:
    t = t.detach() if t.requires_grad else t  # (detach makes a new tensor object: only where NumPy needs it)
    return t if t.device.type == "cpu" else t.to("cpu")


def flat_values(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as a 1-D CPU tensor of stride 1, in row-major order, whatever its layout.

    ``contiguous()`` alone is not enough: a tensor whose size-1 dimensions carry odd strides (``x[:, -1]``
    of a [1, 16] tensor has shape [1] and stride 16) counts as contiguous and keeps them, and viewing
    it as bytes then fails. Lazy conjugate and negative bits are resolved, so the bits are the values'.
    """
    c = _cpu(t)
    if c.layout != torch.strided:
        raise ValueError(f"cannot trace a {str(c.layout).removeprefix('torch.')} tensor: only dense (strided) "
                         "tensors are recorded")
    if c.is_quantized:  # its levels; quant_params holds the grid they lie on
        c = c.int_repr()
    flat = c.resolve_conj().resolve_neg().reshape(-1)
    if flat.numel() and flat.stride(0) != 1:
        flat = flat.clone(memory_format=torch.contiguous_format)
    return flat


def values_of(flat: torch.Tensor) -> np.ndarray:
    """A flat tensor's memory as a NumPy array (shared, no copy): its own values, bfloat16 through
    core.arith.formats.to_numpy (torch hands NumPy no bfloat16 or FP8 array). The digest, the samples and the
    L1 norm all read this one array."""
    return to_numpy(flat) if flat.dtype in _VIA_ML_DTYPES else flat.numpy()


# torch dtypes whose memory NumPy reads as it is (``Tensor.numpy``): their followed rows are cut and flattened in
# NumPy; ml_dtypes' formats (bfloat16, FP8) go through core.arith.formats.to_numpy
_NUMPY_READABLE = frozenset({f.torch_dtype for f in FORMATS.values() if f.native_numpy}
                            | {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})


def rows_values(t: torch.Tensor, share: int | None, row: int) -> tuple[tuple[int, ...], np.ndarray] | None:
    """(shape, values) of t's rows ``row * share`` to ``(row + 1) * share - 1`` (all of t for ``share`` None): the
    shape of the cut and its values as a 1-D NumPy array in row-major order, the same bits that
    ``values_of(flat_values(...))`` gives of ``t.narrow(0, row * share, share)``; None for a tensor this does not read
    (another device or layout, bfloat16, complex, lazy negation: ``flat_values`` handles those). A trace reads two
    or three tensors per op, and NumPy's slice and ravel cost a fraction of torch's narrow, reshape and the checks
    ``flat_values`` makes."""
    if t.dtype not in _NUMPY_READABLE or not t.is_cpu or t.layout != torch.strided or t.is_neg():
        return None
    a = (t.detach() if t.requires_grad else t).numpy()
    if share is not None:
        a = a[row * share:(row + 1) * share]
    v = a.ravel()  # a view where the memory allows, else a row-major copy
    if v.size and v.strides[0] != v.itemsize:  # one element with an odd stride (a size-1 dimension's)
        v = v.copy()
    return a.shape, v


def digest_of(shape: tuple[int, ...], dtype: torch.dtype, values: np.ndarray, grid: bytes = b"") -> str:
    """``digest`` of a tensor of this shape and dtype whose row-major values are ``values`` (``grid``: a quantized
    tensor's ``quant_params``)."""
    h = xxhash.xxh3_64(_prefix(shape, dtype) + grid if grid else _prefix(shape, dtype))
    if values.size:
        h.update(values)  # its memory, as bytes (values is 1-D and contiguous: byte_view's bytes)
    return h.hexdigest()


def digest(t: torch.Tensor, flat: torch.Tensor | None = None, values: np.ndarray | None = None) -> str:
    """``DIGEST`` of the tensor's shape, dtype and bits, in row-major order (the layout does not count).
    ``flat``, ``values``: ``flat_values(t)`` and ``values_of`` of it, where the caller has them already."""
    h = xxhash.xxh3_64(_prefix(t.shape, t.dtype) + quant_params(t) if t.is_quantized else _prefix(t.shape, t.dtype))
    if t.numel():
        if values is None:
            values = values_of(flat_values(t) if flat is None else flat)
        h.update(byte_view(values))  # the bytes in order (a bool is one byte, 0 or 1)
    return h.hexdigest()


@functools.lru_cache(maxsize=4096)  # a run meets few shapes, again and again
def _prefix(shape: torch.Size, dtype: torch.dtype) -> bytes:
    """What a digest hashes before the bits: the shape and the dtype, as text."""
    return f"{tuple(shape)}{dtype}".encode()


def quant_params(t: torch.Tensor) -> bytes:
    """What places a quantized tensor's levels on the number line: its scheme, scales and zero points (per tensor
    or per channel, with the channels' axis), as bytes for its digest."""
    scheme = t.qscheme()
    if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return f"{scheme}{float(t.q_scale()).hex()}/{int(t.q_zero_point())}".encode()
    scales = t.q_per_channel_scales().detach().to("cpu", torch.float64).numpy()
    zeros = t.q_per_channel_zero_points().detach().to("cpu", torch.int64).numpy()
    return f"{scheme}{int(t.q_per_channel_axis())}".encode() + scales.tobytes() + zeros.tobytes()


def _combined(digests: list[str]) -> str:
    """One digest for several (equal exactly when all of them are)."""
    return xxhash.xxh3_64_hexdigest("".join(digests).encode())


def sample_positions(numel: int, count: int = SAMPLE) -> list[int]:
    """``count`` flat positions spread evenly over 0 .. numel - 1 (all of them for a small tensor)."""
    return list(positions(numel, count))


@functools.lru_cache(maxsize=4096)  # as positions: the same few index lists, asked for again and again
def _position_array(idx: tuple[int, ...]) -> np.ndarray:
    return np.asarray(idx, dtype=np.int64)


@functools.lru_cache(maxsize=4096)  # a run meets few sizes, again and again: each op of a trace asks
def positions(numel: int, count: int) -> tuple[int, ...]:
    """``sample_positions`` as a tuple (shared: the cache's own)."""
    if numel <= count:
        return tuple(range(numel))
    return tuple(sorted({round(i * (numel - 1) / (count - 1)) for i in range(count)}))


def sample_hex(t: torch.Tensor, idx: list[int], flat: torch.Tensor | None = None,
             values: np.ndarray | None = None) -> list[str]:
    """The sampled values' bits as big-endian hex (floats; a complex value's real part, then its imaginary
    part), or their decimal text (integers, a quantized tensor's levels). ``flat``, ``values``:
    ``flat_values(t)`` and ``values_of`` of it, where the caller has them already."""
    flat = flat_values(t) if flat is None else flat
    fmt = _FORMATS.get(flat.dtype)
    if fmt is not None:
        values = values_of(flat) if values is None else values
        return hex_digits(bit_view(values)[_position_array(tuple(idx))], fmt)
    part = _PARTS.get(flat.dtype)
    if part is not None:  # each value's two parts' hex, joined
        picked = flat[torch.tensor(idx, dtype=torch.long)] if idx else flat[:0]
        parts = hex_digits(bit_view(values_of(torch.view_as_real(picked).reshape(-1))), _FORMATS[part])
        return [re + im for re, im in zip(parts[::2], parts[1::2], strict=True)]
    picked = flat[torch.tensor(idx, dtype=torch.long)] if idx else flat[:0]
    return [str(int(v)) for v in picked.tolist()]


_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)


def l1_norm(flat: torch.Tensor, values: np.ndarray | None = None) -> float | None:
    """sum |x| of a flat tensor (``flat_values``), accumulated in float64; None for no values or a sum that is not
    finite (a NaN or an infinity among them: the L1 check is then not made). |x| is exact for floats, and a complex
    value counts |re| + |im| (its parts are what a trace samples and judges); integers are widened to float64
    before |x| is taken, so no value (int64's most negative, which casting -inf gives) comes out negative."""
    if not flat.numel():
        return None
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
        values = None
    if flat.dtype in _NUMPY_FLOATS:  # NumPy widens while it sums, in blocks: no float64 copy of the whole tensor
        return l1_of(flat.numpy() if values is None else values, flat.dtype)
    with torch.no_grad():  # integers and booleans: widened first, since |x| of int64's most negative value overflows
        l1 = float(flat.to(torch.float64).abs().sum())
    return l1 if math.isfinite(l1) else None


def sample_text(values: np.ndarray, dtype: torch.dtype, pos: tuple[int, ...], pending: list | None = None) -> list[str]:
    """``sample_hex`` of the values ``rows_values`` gave (positions ``pos``): the same text. ``pending``: where
    given, a float sample's text is left to ``write_samples`` (the list returned is filled then)."""
    fmt = _FORMATS.get(dtype)
    picked = values[_position_array(pos)]
    if fmt is None:
        return [str(int(v)) for v in picked.tolist()]
    if pending is None:
        return hex_digits(bit_view(picked), fmt)
    text: list[str] = []
    pending.append((text, picked, fmt))
    return text


def write_samples(pending: list) -> None:
    """Fill the lists ``sample_text`` left (text, values, format): one bit view and one hex conversion per format
    for all of them, not two per op (the same text)."""
    for fmt in {f for _, _, f in pending}:
        mine = [(text, values) for text, values, f in pending if f is fmt]
        hexes = hex_digits(bit_view(np.concatenate([v for _, v in mine])), fmt)
        at = 0
        for text, values in mine:
            text[:] = hexes[at:at + len(values)]
            at += len(values)
    pending.clear()


_EXACT_INTEGERS = 2.0 ** 52  # below this any order of summing non-negative integers is exact (margin of 2)


def l1_of(values: np.ndarray, dtype: torch.dtype) -> float | None:
    """``l1_norm`` of the values ``rows_values`` gave, the same number: floats as l1_norm sums them; integers
    and booleans in NumPy where their sum is exact in any order (every partial sum an integer below 2^53), so
    torch's order, which l1_norm uses, gives the same; larger ones through l1_norm itself."""
    if not values.size:
        return None
    if dtype in _NUMPY_FLOATS:
        l1 = float(np.add.reduce(np.abs(values), dtype=np.float64))
    elif dtype == torch.bool:
        l1 = float(np.count_nonzero(values))
    else:
        x = np.abs(values.astype(np.float64))
        if float(x.max()) * x.size < _EXACT_INTEGERS:
            l1 = float(np.add.reduce(x))
        else:
            return l1_norm(torch.from_numpy(values))
    return l1 if math.isfinite(l1) else None


# what stands for the digest of uninitialised memory (an empty tensor's, before any op writes it, and what an op
# makes from it): its bytes are whatever the allocator left there, different from run to run. XXH3 gives sixteen
# zeros to one tensor in 2^64, so a reader can take the marker for no digest of bits
UNINITIALISED = "0" * 16


def scratch_digest(t: torch.Tensor) -> str:
    """What stands for a scratch tensor's bits: its shape and dtype only (its bytes are no result)."""
    return xxhash.xxh3_64_hexdigest(_prefix(t.shape, t.dtype) + b"scratch")


class TensorMap:
    """tensor -> value, by identity, forgetting a tensor when it is freed. torch's WeakTensorKeyDictionary
    makes a weak reference on every lookup; this one makes one when a tensor is added, and a lookup is a
    plain dict lookup by id (a trace looks each tensor up several times per op). An entry is dropped by the
    weak reference's callback, which runs before the tensor's memory (and so its id) can be reused, and a
    lookup also checks that the reference still points at the tensor asked for."""

    def __init__(self) -> None:
        self._d: dict[int, tuple[weakref.ref, object]] = {}

    def get(self, t: torch.Tensor, default=None):
        e = self._d.get(id(t))
        return e[1] if e is not None and e[0]() is t else default

    def __setitem__(self, t: torch.Tensor, value) -> None:
        key, d = id(t), self._d
        e = d.get(key)
        if e is not None and e[0]() is t:
            d[key] = (e[0], value)
            return

        def forget(ref, key=key, d=d):
            if (e := d.get(key)) is not None and e[0] is ref:
                del d[key]

        d[key] = (weakref.ref(t, forget), value)

    def __len__(self) -> int:
        return len(self._d)


# the largest memory allocated without data that is tracked (its record takes a byte of host memory per byte);
# larger is taken for data, as all memory was before it was tracked
MAX_TRACKED_BYTES = 2**27


def _storage_of(t: torch.Tensor) -> tuple[int, int] | None:
    """(address, bytes) of t's memory; None for a tensor without storage (sparse, a wrapper subclass)."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return storage.data_ptr(), storage.nbytes()


class Allocation:
    """Memory that held no data when it was allocated (an ``empty`` tensor's storage): which of its bytes ops have
    written since, one bool per byte (bytes, so a view of it in another dtype reads the same). ``written`` is None
    once all of them were written, and the memory is plain data from then on."""

    __slots__ = ("nbytes", "ptr", "written")

    def __init__(self, where: tuple[int, int], written: bool) -> None:
        self.ptr, self.nbytes = where
        self.written: torch.Tensor | None = torch.full((self.nbytes,), written, dtype=torch.bool)

    @staticmethod
    def of(t: torch.Tensor, written: bool = False) -> Allocation | None:
        """t's memory, all of it ``written`` or not; None where it is not tracked (no storage, or too large)."""
        where = _storage_of(t)
        return Allocation(where, written) if where is not None and where[1] <= MAX_TRACKED_BYTES else None

    def bytes_of(self, t: torch.Tensor) -> torch.Tensor | None:
        """t's bytes in ``written`` (one row of ``element_size`` per element); None where t no longer lies in this
        memory (``set_`` or ``resize_`` moved it) or all of it is written."""
        if self.written is None:
            return None
        if _storage_of(t) != (self.ptr, self.nbytes):
            return None
        size = t.element_size()
        try:
            return self.written.as_strided((*t.shape, size), (*(s * size for s in t.stride()), 1),
                                           t.storage_offset() * size)
        except RuntimeError:  # a layout as_strided cannot express over these bytes
            return None


class UninitialisedMemory:
    """The tensors of a run that lie in memory allocated without data (an ``empty`` tensor, its views, what an op
    made by reading one), each with its ``Allocation``. ``tracked`` is empty while there are none (the recorder
    asks it before anything else: most runs have none, or few)."""

    def __init__(self) -> None:
        self._map = TensorMap()
        self.tracked = self._map._d

    def allocated(self, outs: list) -> None:
        """``outs`` were just allocated without data."""
        for o in outs:
            if (alloc := Allocation.of(o)) is not None:
                self._map[o] = alloc

    def holds_no_data(self, t: torch.Tensor) -> bool:
        """Whether t lies in memory allocated without data and no op has written any of its bytes since (a tensor
        written in part holds data: what an op leaves unwritten is beyond the trace)."""
        alloc = self._map.get(t)
        if alloc is None or alloc.written is None or not t.numel():
            return False
        b = alloc.bytes_of(t)
        return b is not None and not bool(b.any())

    def after_view(self, tensors_in: list, outs: list) -> None:
        """After an op that is not recorded (a view, a detach, a clone) and read a tracked tensor: an output in
        that memory (a view) is tracked in it; a copy of memory that held no data holds none."""
        src = next((a for a in tensors_in if self._map.get(a) is not None), None)
        if src is None:
            return
        alloc, empty = self._map.get(src), None
        for o in outs:
            if (where := _storage_of(o)) is not None and where[0] == alloc.ptr:
                self._map[o] = alloc
            elif empty is not False and (empty := self.holds_no_data(src)) and (new := Allocation.of(o)) is not None:
                self._map[o] = new

    def after_op(self, name: str, tensors_in: list, outs: list, written: list) -> None:
        """After a recorded op ran (``written``: the arguments it wrote in place). One that reads a tensor that
        holds no data (other than the tensor it writes, and not only for its shape as ``zeros_like`` does) makes
        garbage: what it writes and returns holds no data either. Otherwise the bytes it writes hold data from
        now on (a view's: a slice written is data, the rest of its memory not)."""
        ids = {id(w) for w in written}
        shape_only = name.endswith("_like") or name.startswith("new_")
        garbage = not shape_only and any(id(a) not in ids and self.holds_no_data(a) for a in tensors_in)
        seen = set()
        for o in (*written, *outs):
            if id(o) in seen:
                continue
            seen.add(id(o))
            alloc = self._map.get(o)
            b = alloc.bytes_of(o) if alloc is not None else None
            if b is not None:
                b.fill_(not garbage)
                if not garbage and bool(alloc.written.all()):
                    alloc.written = None
            elif garbage and (alloc := Allocation.of(o, written=True)) is not None:
                # data overwritten with garbage, or new memory: its bytes hold none (the rest of the memory do)
                self._map[o] = alloc
                if (b := alloc.bytes_of(o)) is not None:
                    b.fill_(False)
