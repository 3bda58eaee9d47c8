"""core.arith.loader: the one loader of a visitor's numbers (text, paste, CSV, .npy), its tokeniser and limits.

Its two callers (the Summation lab's core.arith.user_vectors and Diagnose's core.diagnose.loaders) wrap its
LoaderError in their own error types with the same message; the tests at the end hold them to one reading.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith import user_vectors, vectors
from core.arith.loader import (
    MAX_UPLOAD_BYTES,
    LoaderError,
    NpyWords,
    check_length,
    check_upload,
    check_values,
    clip,
    csv_rows,
    errors_as,
    is_numeral,
    read_column,
    read_npy,
    read_numerals,
    read_table,
    read_text,
    significant_digits,
    split_header,
    tokenise,
)
from core.diagnose import loaders


def message(func, *args, **kw) -> str:
    with pytest.raises(LoaderError) as err:
        func(*args, **kw)
    return str(err.value)


# ------------------------------------------------------------------------------ pieces


def test_clip_marks_a_cut_and_keeps_short_text():
    assert clip("abc") == "abc" and clip("x" * 40) == "x" * 40
    assert clip("x" * 41) == "x" * 39 + "…" and len(clip("y" * 500, 20)) == 20
    assert clip(ValueError("no")) == "no"


def test_the_upload_limit_is_streamlits_own():
    from pathlib import Path

    config = (Path(__file__).resolve().parents[3] / ".streamlit" / "config.toml").read_text()
    server_mb = int(next(line.split("=")[1] for line in config.splitlines() if line.startswith("maxUploadSize")))
    assert server_mb * 1024 * 1024 == MAX_UPLOAD_BYTES


def test_tokenise_splits_on_whitespace_commas_and_semicolons_and_drops_a_printed_tensors_wrapping():
    assert tokenise("1, 2;3\n4\t5   6\r\n7,,8 ;; 9\n\n") == [str(i) for i in range(1, 10)]
    printed = "tensor([[ 0.1234, -2.5000],\n        [ 3.0e+00,  nan]], device='cuda:0', dtype=torch.bfloat16)"
    assert tokenise(printed) == ["0.1234", "-2.5000", "3.0e+00", "nan"]
    assert tokenise("array([1., 2.], dtype=float32)") == ["1.", "2."]
    assert tokenise("tensor([1.], requires_grad=True, grad_fn=<AddBackward0>)") == ["1."]
    assert tokenise("  [ ] ") == [] and tokenise("") == []


@pytest.mark.parametrize("good", ["0", "-2.5e-3", "+7", ".5", "5.", "1E3", "1_000", "1_0.2_5e1_0", "nan", "-Infinity",
                                  "INF", "+nan", "١٢", "007"])
def test_numerals(good):
    assert is_numeral(good)
    float(good)


@pytest.mark.parametrize("bad", ["abc", "1.2.3", "0x10", "1/3", "--1", "1e", "€5", "", "_1", "1__0", "1_", ".", "e5",
                                 "1 2", "infinit", "nana"])
def test_not_numerals(bad):
    assert not is_numeral(bad)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789._eE+-naifINFty١", min_size=1, max_size=8))
def test_a_numeral_is_exactly_what_float_reads(token):
    try:
        float(token)
        reads = True
    except ValueError:
        reads = False
    assert is_numeral(token) == reads


def test_significant_digits():
    assert significant_digits("0.1234567") == 7 and significant_digits("-2.5000") == 5
    assert significant_digits("1_000.5") == 5 and significant_digits("0") == 1 and significant_digits("1e-8") == 1
    assert significant_digits("nan") is None and significant_digits("-Infinity") is None


def test_limits_are_checked_with_one_message_each():
    assert message(check_upload, "big.csv", b" " * (MAX_UPLOAD_BYTES + 1)) == (
        f"big.csv is {MAX_UPLOAD_BYTES + 1:,} bytes; at most {MAX_UPLOAD_BYTES:,} bytes are accepted.")
    check_upload("ok.csv", b" " * MAX_UPLOAD_BYTES)
    assert message(check_upload, "n" * 60 + ".csv", b"") == "n" * 39 + "… is empty."
    assert message(check_length, "12345", "The text", 4) == "The text is 5 characters long; at most 4 are accepted."
    check_length("1234", "The text", 4)
    assert message(check_values, "a.npy", 11, 10) == "a.npy holds 11 values; at most 10 are accepted."
    assert message(check_values, "a.npy", 0, 10) == "a.npy holds no values."


# ------------------------------------------------------------------------------ text


def test_read_text_gives_float64_values_as_written_and_the_numerals():
    got = read_text("0.1, -2.5e-3 nan -inf 1e400 1_000", "The text", max_chars=100, max_numbers=10)
    assert got.values.dtype == np.float64 and not got.values.flags.writeable
    assert got.values[:2].tolist() == [0.1, -2.5e-3] and np.isnan(got.values[2])
    assert got.values[3] == -np.inf and got.values[4] == np.inf and got.values[5] == 1000.0
    assert got.numerals == ("0.1", "-2.5e-3", "nan", "-inf", "1e400", "1_000") and got.notes == ()


def test_read_text_checks_in_order_length_emptiness_count_then_numerals():
    assert "characters long" in message(read_text, "1 x" * 10, "T", max_chars=5, max_numbers=1)
    assert message(read_text, " ,; ", "T", max_chars=99, max_numbers=1) == (
        "T holds no numbers. Paste numbers separated by commas, spaces or new lines.")
    assert message(read_text, "1 x 3", "T", max_chars=99, max_numbers=2) == "T holds 3 numbers; at most 2 are accepted."
    assert message(read_numerals, ["1"] * 3, "T", max_numbers=2, accepted="can be pasted") == (
        "T holds 3 numbers; at most 2 can be pasted.")
    assert message(read_text, "1 x 3", "T", max_chars=99, max_numbers=3) == "T: “x” is not a number."
    long = message(read_text, "1 " + "x" * 99, "T", max_chars=999, max_numbers=3)
    assert long == f"T: “{'x' * 29}…” is not a number."


# ------------------------------------------------------------------------------ CSV


def test_csv_rows_and_header():
    rows = csv_rows("a.csv", b"\xef\xbb\xbfvalue, w\r\n\r\n 1 ,2\n,,\n3,4\n")
    assert rows == [["value", "w"], ["1", "2"], ["3", "4"]]
    assert split_header(rows) == (["value", "w"], [["1", "2"], ["3", "4"]])
    assert split_header([["1", ""], ["2", "3"]]) == (None, [["1", ""], ["2", "3"]])
    assert "not UTF-8 text" in message(csv_rows, "l.csv", "é".encode("latin-1"))
    assert "not a readable CSV file (field larger" in message(csv_rows, "f.csv", b'"' + b"1" * 200_000 + b'"\n')


def test_read_column():
    one = read_column("c.csv", b"x\n1\n2\n", max_numbers=9)
    assert one.values.tolist() == [1.0, 2.0] and one.notes == () and not one.first_column
    assert read_column("r.csv", b"1, 2,3\n", max_numbers=9).values.tolist() == [1.0, 2.0, 3.0]
    first = read_column("t.csv", b"a,b\n1,10\n2,20\n", max_numbers=9)
    assert first.values.tolist() == [1.0, 2.0] and first.first_column
    assert first.notes == ("t.csv has 2 columns; the first column was used.",)
    assert message(read_column, "b.csv", b"\n,\n", max_numbers=9) == "b.csv holds no rows."
    assert message(read_column, "h.csv", b"value\n", max_numbers=9) == "h.csv holds only a header row."
    many = message(read_column, "m.csv", b"1\n" * 10, max_numbers=9)
    assert many == "m.csv holds 10 numbers; at most 9 are accepted."


def test_read_table():
    table = read_table("m.csv", b"a,b,c\n1,2,3\n4,5,6\n", max_values=9)
    assert table.values.shape == (2, 3) and table.values.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert table.numerals == tuple("123456") and not table.values.flags.writeable
    assert read_table("c.csv", b"1\n2\n3\n", max_values=9).values.shape == (3,)
    assert message(read_table, "h.csv", b"value\n", max_values=9) == "h.csv holds no rows of numbers."
    assert "rectangular table" in message(read_table, "r.csv", b"1,2\n3\n", max_values=9)
    big = message(read_table, "big.csv", b"1,2\n3,4\n", max_values=3)
    assert big == "big.csv holds 4 values; at most 3 are accepted."
    assert message(read_table, "e.csv", b"1,\n2,3\n", max_values=9) == "e.csv: “” is not a number."


# ------------------------------------------------------------------------------ .npy

WORDS = NpyWords(not_npy="{name}: no header", pickled="{name}: pickled", damaged="{name}: damaged",
                 not_array="{name}: an archive", empty="{name}: empty")


def npy_bytes(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def read(data: bytes, **kw) -> np.ndarray:
    rules = dict(accept=lambda dt: dt.kind == "f", needed="floats are needed.", max_values=5, words=WORDS) | kw
    return read_npy("a.npy", data, **rules)


def test_read_npy_refuses_in_the_callers_words_and_checks_the_rules_in_order():
    assert read(npy_bytes(np.arange(4.0))).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert read(npy_bytes(np.ones((2, 2)))).shape == (2, 2)
    zipped = io.BytesIO()
    np.savez(zipped, x=np.ones(2))
    assert message(read, zipped.getvalue()) == "a.npy: an archive"
    assert message(read, b"1,2,3") == "a.npy: no header"
    assert message(read, npy_bytes(np.array([1.0, None], dtype=object))) == "a.npy: pickled"
    assert message(read, npy_bytes(np.arange(4.0))[:-3]) == "a.npy: damaged"
    assert message(read, npy_bytes(np.arange(3))) == "a.npy holds int64 data; floats are needed."
    assert message(read, npy_bytes(np.ones((2, 2))), ndim=1) == "a.npy has shape (2, 2); a 1-D array is needed."
    assert message(read, npy_bytes(np.ones(6))) == "a.npy holds 6 values; at most 5 are accepted."
    assert message(read, npy_bytes(np.ones(0))) == "a.npy: empty"


# ------------------------------------------------------------------------------ its two callers


@pytest.mark.parametrize("text", ["1, 2;3\n4", "tensor([0.1, -2.5e-3, 1_000])", "[1e-310 5.]", "0.30000000000000004"])
def test_the_lab_and_diagnose_read_the_same_text_alike(text):
    lab = user_vectors.parse_pasted(text, "float64")
    diagnose = loaders.load_pasted(text, "float64")
    assert lab.values.tobytes() == diagnose.values.tobytes()


@pytest.mark.parametrize("text", ["1 x", "1 0x10", "1 " + "y" * 80, "", "[ ]"])
def test_the_lab_and_diagnose_refuse_the_same_text_with_the_same_message(text):
    with pytest.raises(vectors.VectorError) as lab:
        user_vectors.parse_pasted(text, "float32")
    with pytest.raises(loaders.LoadError) as diagnose:
        loaders.load_pasted(text, "float32")
    assert str(lab.value) == str(diagnose.value)


def test_errors_as_raises_the_callers_own_error_with_the_same_message():
    class Mine(ValueError):
        pass

    with pytest.raises(Mine) as err, errors_as(Mine):
        check_upload("e.csv", b"")
    assert str(err.value) == "e.csv is empty."
    assert err.value.__cause__ is None and err.value.__suppress_context__
    with pytest.raises(KeyError), errors_as(Mine):
        raise KeyError("not the loader's")


def test_each_caller_keeps_its_own_error_type_and_limits():
    assert not issubclass(vectors.VectorError, LoaderError) and not issubclass(loaders.LoadError, LoaderError)
    many = "1 " * (loaders.MAX_PASTED_NUMBERS + 1)
    assert user_vectors.parse_pasted(many, "float32").n == loaders.MAX_PASTED_NUMBERS + 1
    with pytest.raises(loaders.LoadError, match=r"can be pasted \(upload a file for more\)"):
        loaders.load_pasted(many, "float32")
    assert user_vectors.MAX_UPLOAD_BYTES is MAX_UPLOAD_BYTES and loaders.MAX_UPLOAD_BYTES is MAX_UPLOAD_BYTES


def test_the_lab_and_diagnose_read_npy_files_through_one_reader():
    """Each keeps its own dtypes, shapes and words; both refuse a file without the .npy header first."""
    plain = b"not an array at all"
    with pytest.raises(vectors.VectorError, match=r"not a readable \.npy file"):
        user_vectors.parse_upload("p.npy", plain, "float32")
    with pytest.raises(loaders.LoadError, match=r"does not start with the \.npy header"):
        loaders.load_array("p.npy", plain)
    ints = npy_bytes(np.arange(3, dtype=np.int16))
    assert user_vectors.parse_upload("i.npy", ints, "float32").values.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(loaders.LoadError, match="holds int16 data"):
        loaders.load_array("i.npy", ints)
