import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith import shares


@settings(max_examples=60, deadline=None)
@given(items=st.integers(0, 500), threads=st.integers(1, 5))
def test_pieces_cover_every_item_once_in_order(items, threads):
    pieces = shares.piece_count(items, threads)
    ranges = shares.cuts(items, pieces)
    assert len(ranges) == pieces
    assert [i for first, last in ranges for i in range(first, last)] == list(range(items))
    assert pieces == 1 if threads == 1 or items <= 1 else 1 < pieces <= min(items, threads * shares.PIECES_PER_THREAD)


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("pieces", [1, 2, 7, 40])
def test_every_piece_runs_exactly_once(threads, pieces):
    seen, lock = [], threading.Lock()

    def kernel(i):
        with lock:
            seen.append((i, threading.get_ident()))

    shares.run_pieces(kernel, pieces, threads)
    assert sorted(i for i, _ in seen) == list(range(pieces))
    if threads == 1:
        assert {t for _, t in seen} == {threading.get_ident()}  # no helper woken for one thread


def test_a_slow_thread_leaves_its_pieces_to_the_others():
    # the caller blocks in its first piece until the helper has done all the others: with fixed shares
    # it would wait for work nobody else may take
    done, lock = threading.Event(), threading.Lock()
    callers, helped = [], []

    def kernel(i):
        if threading.current_thread() is threading.main_thread():
            callers.append(i)
            assert done.wait(10)
            return
        with lock:
            helped.append(i)
            if len(helped) == 15:
                done.set()

    shares.run_pieces(kernel, 16, 2)
    assert len(callers) == 1 and sorted(callers + helped) == list(range(16))


def test_an_error_in_any_piece_reaches_the_caller_and_stops_the_claims():
    ran = []

    def kernel(i):
        ran.append(i)
        if i == 3:
            raise ValueError("piece 3")

    with pytest.raises(ValueError, match="piece 3"):
        shares.run_pieces(kernel, 1000, 2)
    assert len(ran) < 1000
