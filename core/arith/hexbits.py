"""Bit patterns as text: split into sign, exponent and mantissa, written as hex digits (as the pages show them
and recordings and traces keep them), and read back.
"""

from __future__ import annotations

import numpy as np

from core.arith.formats import FORMATS, FloatFormat, from_bit_view


def split_bits(bits: int, fmt: FloatFormat) -> tuple[str, str, str]:
    """(sign, exponent, mantissa) as binary digit strings."""
    s = format(bits, f"0{fmt.width}b")
    return s[0], s[1 : 1 + fmt.exponent_bits], s[1 + fmt.exponent_bits :]


def hex_bits(bits: int, fmt: FloatFormat, prefix: str = "0x") -> str:
    """One bit pattern as 0x and fmt.width / 4 hex digits (the form shown on the pages; recordings keep
    the digits alone, ``prefix=""``)."""
    return f"{prefix}{bits:0{fmt.width // 4}x}"


def bits_of_hex(h: str) -> int:
    """The bit pattern that hex digits stand for (with or without 0x): the inverse of hex_bits."""
    return int(h, 16)


def hex_digits(bits: np.ndarray, fmt: FloatFormat) -> list[str]:
    """Many bit patterns (unsigned, fmt's width) as hex digits without the 0x, one string each,
    big-endian: the vectorised form of hex_bits, as trace files keep their samples."""
    if not len(bits):
        return []
    w = fmt.width // 8  # bytes of one value
    return np.asarray(bits, dtype=fmt.uint_dtype).astype(f">u{w}").tobytes().hex(" ", w).split(" ")


def decode_hex(h: str, dtype: str | None = None) -> float:
    """The float that big-endian hex bits stand for, in format ``dtype`` (a name in FORMATS). Without a
    dtype, 16 digits are float64 and 8 float32. Any other dtype's text (an integer's sample, as
    core.traces records it) is read as a number."""
    if dtype is None:
        dtype = {16: "float64", 8: "float32"}.get(len(h))
        if dtype is None:
            raise ValueError(f"{len(h)} hex digits: give the format")
    fmt = FORMATS.get(dtype)
    if fmt is None:
        return float(h)
    return float(from_bit_view(np.array(int(h, 16)), fmt))
