"""AppTest: the per-request budget and the heavy gate on the pages."""

from __future__ import annotations

import threading
import time

import numpy as np
from streamlit.testing.v1 import AppTest

from core.arith.vectors import VectorSpec
from core.crowd import budget
from core.crowd.bytecache import VECTORS, approx_nbytes
from core.crowd.gate import HEAVY
from core.kernels.orders import ORDERS
from tests.pages.conftest import ROOT, TIMEOUT, all_text, reader

# a shared link far over the per-request budget: every order and 1000 permutations of 10 million float64 values
OVER_BUDGET_LINK = {"vector": "ill_conditioned", "storage": "float64", "n": "10000000", "orders": ",".join(ORDERS),
                    "permutations": "1000"}
OVER = "These settings need more than one request may use"


def open_lab(**params) -> AppTest:
    at = reader("summation_lab")
    at.query_params.update(params)
    return at.run()


def test_an_over_budget_link_gets_a_message_and_nothing_is_computed():
    t0 = time.monotonic()
    at = open_lab(**OVER_BUDGET_LINK)
    assert not at.exception, at.exception
    error = next(e.value for e in at.error if OVER in e.value)
    assert "value operations" in error and "Sorted by increasing |x|" in error
    assert "n at most" in error and "Reduce the settings above" in error
    assert not at.dataframe  # no result, and no 80 MB vector was made for it
    assert VectorSpec(kind="ill_conditioned", n=10_000_000, seed=0, storage="float64", condition=1e8) not in VECTORS
    assert time.monotonic() - t0 < 30


def test_over_budget_keeps_the_last_result_and_fits_again_when_reduced():
    at = open_lab(n="1000", orders="sequential,kahan", permutations="5")
    before = at.dataframe[0].value
    at.number_input(key="sl_n").set_value(10_000_000)  # all at once, as a link would
    at.selectbox(key="sl_source").select("ill_conditioned")
    at.selectbox(key="sl_storage").select("float64")
    at.multiselect(key="sl_orders").set_value(list(ORDERS))
    at.number_input(key="sl_k").set_value(1000).run()
    assert not at.exception
    assert any(OVER in e.value and "The last result that fit stays shown" in e.value for e in at.error)
    assert at.dataframe[0].value.equals(before)  # nothing the visitor had is lost
    assert "n = 1,000" in all_text(at)
    at.number_input(key="sl_n").set_value(2000).run()  # within budget again
    assert not at.exception and not any(OVER in e.value for e in at.error)
    assert "n = 2,000" in all_text(at) and len(at.dataframe[0].value) == len(ORDERS)


def test_session_state_holds_the_recipe_not_the_vector():
    at = open_lab(n="2000000", storage="float64", orders="sequential", permutations="0")
    assert not at.exception
    assert isinstance(at.session_state["sl_last"], VectorSpec)
    held = sum(approx_nbytes(v) for v in at.session_state.values())
    assert held < 1_000_000, held  # the 16 MB vector lives in the byte-bounded cache only
    assert VectorSpec(kind="normal", n=2_000_000, seed=0, storage="float64", condition=1e8) in VECTORS


def test_a_heavy_request_waits_for_a_slot_and_says_so():
    spec = dict(n="5000000", storage="float32", orders="sequential", permutations="0", seed="11")
    cost = budget.sumlab_cost(5_000_000, "float32", "same", ("sequential",), 0, "normal")
    assert cost.heavy and cost.fits
    full = threading.Event()
    free = threading.Event()

    def occupy():
        with HEAVY.hold():
            full.set()
            free.wait(timeout=60)

    holders = [threading.Thread(target=occupy) for _ in range(HEAVY.slots)]
    for t in holders:
        t.start()
    while HEAVY.inside < HEAVY.slots:
        time.sleep(0.01)
    threading.Timer(1.5, free.set).start()
    t0 = time.monotonic()
    at = open_lab(**spec)
    waited = time.monotonic() - t0
    for t in holders:
        t.join()
    assert not at.exception and waited >= 1.4
    waited_note = " ".join(c.value for c in at.caption)
    assert "for a free slot" in waited_note and f"{HEAVY.slots} other heavy computation" in waited_note
    assert "n = 5,000,000" in all_text(at)


def test_a_cheap_request_never_waits_behind_heavy_ones():
    release = threading.Event()

    def occupy():
        with HEAVY.hold():
            release.wait(timeout=120)

    holders = [threading.Thread(target=occupy) for _ in range(HEAVY.slots)]
    for t in holders:
        t.start()
    try:
        while HEAVY.inside < HEAVY.slots:
            time.sleep(0.01)
        at = open_lab(n="1000", seed="12")  # the gate is full, and this request is cheap
        assert not at.exception and len(at.dataframe[0].value) > 0
        assert HEAVY.inside == HEAVY.slots  # it never took a slot
    finally:
        release.set()
        for t in holders:
            t.join()


def test_the_results_are_those_of_the_lab_itself():
    """Going through the caches changes nothing in what is shown."""
    from core.arith.vectors import generate
    from core.studies.sumlab import run_lab
    from ui.sumlab_view import results_table

    at = open_lab(n="3000", storage="float16", orders="sequential,pairwise,correct", permutations="0", seed="4")
    v = generate(VectorSpec(kind="normal", n=3000, seed=4, storage="float16"))
    direct = results_table(run_lab(v.values, "float16", "same", ("sequential", "pairwise", "correct")))
    shown = next(df.value for df in at.dataframe if "bits" in df.value.columns)  # the full table, folded
    assert list(shown["bits"]) == list(direct["bits"]) and np.all(shown["order"] == direct["order"])


def test_a_seed_study_over_budget_is_refused_with_advice_and_cannot_start():
    at = reader("training_divergence")
    at.query_params.update({"steps": "2000"})
    at.run()
    assert not at.exception
    assert not any(OVER in e.value for e in at.error)  # 6 seeds of 2,000 steps fit
    at.number_input(key="td_k").set_value(16).run()
    assert not at.exception
    error = next(e.value for e in at.error if OVER in e.value)
    assert "seeds or fewer at 2,000 steps" in error and "steps or fewer with 16 seeds" in error
    assert at.button(key="td_seeds").disabled


def test_cpu_vs_gpu_takes_its_vector_from_the_shared_byte_bounded_cache():
    at = AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)
    at.query_params.update({"vector": "uniform", "n": "1000", "format": "float64"})
    at.run()
    assert not at.exception
    assert VectorSpec(kind="uniform", n=1000, seed=0, storage="float64") in VECTORS


def test_cold_viewers_of_one_link_wait_for_one_computation(monkeypatch):
    """A room that reaches the Summation lab before anyone has opened it: every viewer asks for the same result at
    once, one computes it and the others wait for it (each order summed once, one permutation study), and all
    see the same table."""
    import core.studies.sumlab as sumlab

    calls = {"orders": 0, "study": 0}
    lock = threading.Lock()

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            with lock:
                calls[name] += 1
            time.sleep(0.5)  # long enough that every viewer asks while the first one computes
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(sumlab, "run_orders", counted("orders", sumlab.run_orders))
    monkeypatch.setattr(sumlab, "permutation_study", counted("study", sumlab.permutation_study))
    # a seed no other test asks for: nothing of this link is in the shared caches yet
    link = dict(n="20000", storage="float32", orders="sequential,pairwise,correct", permutations="5", seed="90417")
    viewers: list[AppTest] = []

    def view():
        at = open_lab(**link)
        with lock:
            viewers.append(at)

    threads = [threading.Thread(target=view) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=TIMEOUT)
    assert len(viewers) == 6 and not any(at.exception for at in viewers)
    assert calls == {"orders": 1, "study": 1}, calls
    tables = [at.dataframe[0].value for at in viewers]
    assert all(t.equals(tables[0]) for t in tables)
