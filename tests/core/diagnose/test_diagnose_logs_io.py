"""core.diagnose.loaders (safe loading within limits) and core.diagnose.logs (chaos or a jump)."""

from __future__ import annotations

import io
import math
import zipfile

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from core.diagnose.examples import EXAMPLES, JUMP_STEP, make_example, make_log_example, toy_training
from core.diagnose.loaders import (
    MAX_LOG_ROWS,
    MAX_PASTED_NUMBERS,
    MAX_UPLOAD_BYTES,
    LoadError,
    LossLog,
    load_array,
    load_input,
    load_pasted,
    parse_log,
)
from core.diagnose.logs import TINY_ULPS, diagnose_logs
from core.diagnose.measure import MAX_ELEMENTS


def npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def pt(obj, **kw) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


TRIGGERED: list[str] = []


class Payload:
    """Unpickling this would run code: it must never happen."""

    def __reduce__(self):
        return (TRIGGERED.append, ("unpickled",))


# ----------------------------------------------------------------------------- arrays


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_npy_round_trip(dt):
    arr = np.arange(12, dtype=dt).reshape(3, 4) / 7
    got = load_array("x.npy", npy(arr))
    assert got.fmt == np.dtype(dt).name and np.array_equal(got.values, arr) and got.shape == (3, 4)


def test_npy_refusals_never_unpickle():
    obj = np.empty(2, dtype=object)
    obj[0] = Payload()
    with pytest.raises(LoadError, match="holds an object array"):
        load_array("evil.npy", npy(obj))
    assert TRIGGERED == []
    with pytest.raises(LoadError, match="int64"):
        load_array("i.npy", npy(np.arange(3)))
    with pytest.raises(LoadError, match="damaged or cut short"):  # the header's magic, then nothing readable
        load_array("g.npy", b"\x93NUMPY garbage")
    # random bytes were refused as an object array; the reason is that they are no .npy at all
    with pytest.raises(LoadError, match=r"does not start with the \.npy header") as err:
        load_array("r.npy", bytes(range(256)) * 4)
    assert "object array" not in str(err.value)
    with pytest.raises(LoadError, match="damaged or cut short"):
        load_array("cut.npy", npy(np.arange(100, dtype=np.float32))[:-40])
    with pytest.raises(LoadError, match="empty"):
        load_array("e.npy", b"")
    with pytest.raises(LoadError, match="bytes"):
        load_array("big.npy", b"0" * (MAX_UPLOAD_BYTES + 1))
    with pytest.raises(LoadError, match=f"at most {MAX_ELEMENTS:,}"):
        load_array("many.npy", npy(np.zeros(MAX_ELEMENTS + 1, np.float16)))
    assert load_input("many.npy", npy(np.zeros(MAX_ELEMENTS + 1, np.float16))).values.size == MAX_ELEMENTS + 1
    buf = io.BytesIO()
    np.savez(buf, a=np.ones(2))
    with pytest.raises(LoadError):
        load_array("z.npy", buf.getvalue())
    with pytest.raises(LoadError, match="upload a"):
        load_array("x.pkl", b"abc")


def test_torch_files():
    t = torch.randn(3, 5)
    got = load_array("t.pt", pt(t))
    assert got.fmt == "float32" and np.array_equal(got.values, t.numpy())
    got = load_array("d.pth", pt({"out": t.bfloat16()}))
    assert got.fmt == "bfloat16" and got.values.dtype == ml_dtypes.bfloat16 and "out" in got.source
    assert np.array_equal(got.values.astype(np.float32), t.bfloat16().float().numpy())
    assert load_array("l.pt", pt([t.double()])).fmt == "float64"


def test_torch_refusals_never_unpickle():
    with pytest.raises(LoadError, match="weights_only"):
        load_array("evil.pt", pt({"x": Payload()}))
    assert TRIGGERED == []
    with pytest.raises(LoadError, match="zip format"):
        load_array("old.pt", pt(torch.ones(2), _use_new_zipfile_serialization=False))
    raw = pt(torch.ones(1000))
    zin = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))
    with pytest.raises(LoadError, match="compressed"):
        load_array("deflated.pt", out.getvalue())
    with pytest.raises(LoadError, match="2 tensors"):
        load_array("two.pt", pt({"a": torch.ones(2), "b": torch.ones(2)}))
    with pytest.raises(LoadError, match="no tensor"):
        load_array("none.pt", pt({"a": 1}))
    with pytest.raises(LoadError, match="int64"):
        load_array("int.pt", pt(torch.arange(3)))
    with pytest.raises(LoadError, match="dense"):
        load_array("sparse.pt", pt(torch.eye(3).to_sparse()))
    with pytest.raises(LoadError, match="zip"):
        load_array("junk.pt", b"not a zip at all")


def test_csv_and_text():
    got = load_array("m.csv", b"a,b,c\n1,2,3\n4,5,6\n")
    assert got.shape == (2, 3) and got.fmt == "float32"
    assert load_array("c.csv", b"1\n2\n3\n").shape == (3,)
    assert load_array("r.txt", b"1,2,3\n").shape == (3,)
    nan = load_array("n.csv", b"1\nnan\ninf\n-inf\n")
    assert np.isnan(nan.values[1]) and np.isinf(nan.values[2])
    assert load_array("h.csv", b"0.1\n", "float64").values[0] == 0.1
    with pytest.raises(LoadError, match="different numbers of columns"):
        load_array("rag.csv", b"1,2\n3\n")
    with pytest.raises(LoadError, match="not a number"):
        load_array("bad.csv", b"1\nx\n")
    with pytest.raises(LoadError, match="UTF-8"):
        load_array("latin.csv", "1\n\xe9\n".encode("latin-1"))
    with pytest.raises(LoadError, match="no rows"):
        load_array("hdr.csv", b"value\n")


def test_pasted_lists():
    got = load_pasted("tensor([ 0.1234567, -2.5000,\n 3.0e+00], dtype=torch.float32)", "float32")
    assert got.values.tolist() == [np.float32(0.1234567), -2.5, 3.0]
    assert got.notes and "significant digits" in got.notes[0]
    assert not any("significant digits" in n for n in load_pasted("0.123456789 1.00000000", "float32").notes)
    assert load_pasted("1;2 3\n4", "float64").values.size == 4
    with pytest.raises(LoadError, match="not a number"):
        load_pasted("1, 2, [x](https://example.com)", "float32")
    with pytest.raises(LoadError, match="no numbers"):
        load_pasted("  [ ] ", "float32")
    with pytest.raises(LoadError, match=f"at most {MAX_PASTED_NUMBERS:,}"):
        load_pasted("1 " * (MAX_PASTED_NUMBERS + 1), "float32")
    assert "overflow" in load_pasted("1e40", "float32").notes[-1]


def test_text_is_rounded_to_the_format_once_from_its_decimal_digits():
    """1 + 2^-24 + 2^-60 reads as float64's 1 + 2^-24, a float32 tie that rounds to 1; the text itself is above
    the tie, so float32 holds 1 + 2^-23 (core.arith.user_vectors.round_numerals, as the Summation lab reads it)."""
    from fractions import Fraction

    from core.arith.exact import exact_decimal

    text = exact_decimal(1 + Fraction(1, 2**24) + Fraction(1, 2**60))
    assert float(text) == 1 + 2**-24
    assert load_pasted(text, "float32").values.tolist() == [1 + 2**-23]
    assert load_array("t.csv", f"{text}\n{text}\n".encode()).values.tolist() == [1 + 2**-23] * 2
    assert load_pasted("1_000.5", "float64").values.tolist() == [1000.5]  # digits grouped as Python writes them


# ------------------------------------------------------------------------------ logs


def test_parse_log_formats():
    tb = parse_log("tb.csv", b"Wall time,Step,Value\n1.7e9,10,0.69\n1.7e9,20,0.5\n")
    assert tb.steps.tolist() == [10, 20] and tb.values.tolist() == [0.69, 0.5]
    assert parse_log("sv.csv", b"step,loss\n1,2.0\n2,1.5\n").values.tolist() == [2.0, 1.5]
    assert parse_log("two.csv", b"5,1.0\n6,0.9\n").steps.tolist() == [5, 6]
    one = parse_log("p", "0.7\n0.6\n0.5")
    assert one.steps.tolist() == [1, 2, 3]
    assert one.resolution.tolist() == [0.05, 0.05, 0.05]
    assert parse_log("p", "1,0.6931471824645996\n").resolution[0] == pytest.approx(0.5e-16)
    with pytest.raises(LoadError, match="increase"):
        parse_log("d.csv", b"2,1\n1,1\n")
    with pytest.raises(LoadError, match="whole numbers"):
        parse_log("f.csv", b"1.5,1\n2,1\n")
    with pytest.raises(LoadError, match="not a number"):
        parse_log("x.csv", b"1,0.5\n2,abc\n")
    with pytest.raises(LoadError, match="columns and no header"):
        parse_log("w.csv", b"1,2,3,4\n")
    with pytest.raises(LoadError, match=f"at most {MAX_LOG_ROWS:,}"):
        parse_log("long", "\n".join(["1"] * (MAX_LOG_ROWS + 1)))


def log(values, steps=None, resolution=0.0) -> LossLog:
    v = np.asarray(values, dtype=np.float64)
    s = np.arange(1, v.size + 1) if steps is None else np.asarray(steps)
    return LossLog(steps=s.astype(np.int64), values=v, resolution=np.full(v.size, resolution), source="test")


def test_identical_and_tiny_logs():
    a = toy_training(steps=60)
    assert diagnose_logs(log(a), log(a.copy())).verdict == "identical"
    wobble = a * (1 + 1e-7 * np.sin(np.arange(a.size)))
    d = diagnose_logs(log(a), log(wobble))
    assert d.verdict == "tiny" and d.first_step is not None


def test_logistic_map_is_chaotic_with_lyapunov_exponent_ln2():
    """x -> 4x(1-x) doubles a small gap per step on average (Lyapunov exponent ln 2)."""
    def orbit(x0, n=60):
        out = [x0]
        for _ in range(n - 1):
            out.append(4 * out[-1] * (1 - out[-1]))
        return np.array(out) + 1.0  # a positive "loss"
    d = diagnose_logs(log(orbit(0.3)), log(orbit(0.3 + 1e-15)), "float64")
    assert d.verdict == "amplified" and d.jump_step is None
    assert 0.35 < d.growth_per_step < 1.2  # ln 2 ≈ 0.69, fitted on a noisy growth
    assert d.first_gap <= TINY_ULPS * 2.0**-52


def test_bundled_training_logs():
    a, b, _ = make_log_example("reordered")
    d = diagnose_logs(a, b)
    assert d.verdict == "amplified" and d.growth_per_step > 0 and d.doubling_steps > 0
    assert d.first_gap < 1e-6 and d.fit_range[0] == d.first_step
    a, b, _ = make_log_example("jump")
    d = diagnose_logs(a, b)
    assert (d.verdict, d.jump_step, d.first_step) == ("jump", JUMP_STEP, JUMP_STEP)


def test_jump_after_chaos_started_is_found():
    a, b = toy_training(), toy_training(order_seed=3, flip_from=60)
    d = diagnose_logs(log(a), log(b))
    assert d.verdict == "jump" and d.jump_step == 60 and d.first_step < 60


def test_printed_and_sparse_logs_stay_amplified():
    a, b = toy_training(), toy_training(order_seed=3)
    a4, b4 = np.round(a, 4), np.round(b, 4)
    d = diagnose_logs(log(a4, resolution=0.5e-4), log(b4, resolution=0.5e-4))
    assert d.verdict == "amplified"
    idx = np.arange(0, a.size, 10)
    assert diagnose_logs(log(a[idx], idx + 1), log(b[idx], idx + 1)).verdict == "amplified"


def test_nan_in_one_log_is_a_jump_and_logs_are_aligned_by_step():
    a, b = toy_training(steps=80), toy_training(order_seed=3, steps=80)
    b[50] = math.nan
    d = diagnose_logs(log(a), log(b))
    assert d.verdict == "jump" and d.jump_step == 51
    d = diagnose_logs(log(a, np.arange(1, 81)), log(a[::2], np.arange(1, 81)[::2]))
    assert d.verdict == "identical" and d.steps.size == 40 and d.notes
    with pytest.raises(LoadError, match="fewer than 2"):
        diagnose_logs(log([1.0, 2.0], [1, 2]), log([1.0, 2.0], [3, 4]))


def test_first_difference_too_large_is_a_jump():
    a = toy_training(steps=50)
    b = a.copy()
    b[20:] *= 1.01
    d = diagnose_logs(log(a), log(b))
    assert (d.verdict, d.jump_step) == ("jump", 21)


# -------------------------------------------------------------------------- examples


def test_bundled_examples_are_well_formed():
    for key in EXAMPLES:
        ex = make_example(key)
        assert ex.actual.shape == ex.expected.shape and ex.code and ex.live_note
    ex = make_example("threads")
    same = bool((ex.actual == ex.expected).item())
    assert ("same bits" in ex.live_note or "single thread" in ex.live_note) == same


def test_numbers_rounded_when_read_are_named():
    """3.0000001 and 3.0 compare identical in float32: the note says the first was rounded to 3 when read."""
    notes = load_pasted("3.0000001 2", "float32").notes
    assert any("“3.0000001” became 3" in n and "1 number(s)" in n for n in notes), notes
    assert not any("rounded to the nearest" in n for n in load_pasted("3.0000001", "float64").notes)
    assert any("“1.001” became 1" in n for n in load_pasted("1.001", "bfloat16").notes)


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_a_float32_printed_with_nine_digits_is_not_said_to_be_rounded(bits):
    """What float32 prints (nine significant digits, as torch's precision=10 does) reads back as itself."""
    x = float(np.array([bits], dtype=np.uint32).view(np.float32)[0])
    assume(math.isfinite(x))
    notes = load_pasted(f"{x:.9g}", "float32").notes
    assert not any("rounded to the nearest" in n for n in notes), (x, notes)
