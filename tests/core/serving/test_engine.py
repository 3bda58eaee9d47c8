"""The serving engine: invariants that hold on every machine (never a fork count measured on one)."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.machines.globalstate import GlobalState
from core.serving import corpus
from core.serving.engine import (
    MAX_PROMPT,
    ServeSettings,
    fork_study,
    lone_run,
    model_for,
    schedule,
    serve,
    serving_cost,
)
from core.serving.kernels import KERNELS
from core.serving.model import ModelConfig, decode, encode

SHORT = dict(new_tokens=12)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 12), batch=st.integers(1, 8), seed=st.integers(0, 10**6),
       dtype=st.sampled_from(["float32", "bfloat16"]), rate=st.sampled_from([0.3, 1.0, 4.0]),
       prompt=st.sampled_from(["the baker painted", "a", "my sister saw the big tree"]))
def test_batch_invariant_serving_gives_one_completion_for_every_n_and_schedule(n, batch, seed, dtype, rate, prompt):
    s = ServeSettings(requests=n, max_batch=batch, seed=seed, dtype=dtype, kernels="batch_invariant",
                      arrivals_per_step=rate, prompt=prompt, **SHORT)
    r = serve(s)
    assert r.distinct == 1 and r.identical_requests == n
    assert r.completions[0].text == r.alone and r.completions[0].fork is None
    assert r.rows_bits_differ == 0 and r.rows_argmax_flip == 0


@pytest.mark.parametrize("kernels", sorted(KERNELS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_request_served_alone_repeats_itself(kernels, dtype):
    s = ServeSettings(requests=1, kernels=kernels, dtype=dtype, **SHORT)
    model = model_for(dtype)
    first = lone_run(model, KERNELS[kernels], s)
    for _ in range(3):
        again = lone_run(model, KERNELS[kernels], s)
        assert again[0] == first[0] and torch.equal(again[1].view(torch.int32), first[1].view(torch.int32))


@pytest.mark.parametrize("kernels", sorted(KERNELS))
def test_the_engine_at_batch_size_one_is_a_plain_loop_over_the_model(kernels):
    """With one request at a time the engine's every completion is the plain greedy loop's."""
    s = ServeSettings(requests=5, others=3, max_batch=1, kernels=kernels, dtype="float32", **SHORT)
    r = serve(s)
    model = model_for("float32")
    cache = model.new_cache()
    logits = model.forward(KERNELS[kernels], [encode(s.prompt)], [cache])[0]
    out = []
    for _ in range(s.new_tokens):  # written out here, not through model.generate
        out.append(int(torch.argmax(logits)))
        logits = model.forward(KERNELS[kernels], [[out[-1]]], [cache])[0]
    assert r.alone == decode(out)
    assert [c.text for c in r.completions] == [decode(out)] and r.completions[0].count == 5
    assert r.rows_bits_differ == 0 and set(r.batch_sizes) == {1}


def test_the_schedule_is_seeded_and_holds_the_identical_requests():
    s = ServeSettings(requests=30, seed=7)
    a, b = schedule(s), schedule(s)
    assert a == b
    assert sum(r.identical for r in a) == 30 and len(a) == 30 + s.other_requests
    assert all(r.prompt == tuple(encode(s.prompt)) for r in a if r.identical)
    assert [r.arrival for r in a] == sorted(r.arrival for r in a)
    assert schedule(ServeSettings(requests=30, seed=8)) != a


def test_batches_really_form():
    r = serve(ServeSettings(requests=20, max_batch=6, arrivals_per_step=4.0, kernels="default", **SHORT))
    assert max(r.batch_sizes) == 6 and min(r.batch_sizes) >= 1
    assert r.tokens == sum(q.new_tokens for q in schedule(r.settings))


def test_a_fork_is_reported_where_the_completion_departs():
    """Whatever forks (or not) on this machine, every reported fork is consistent with the texts."""
    study = fork_study(ServeSettings(requests=24, **SHORT))
    for res in (study.ordinary, study.invariant, study.baseline):
        for c in res.completions:
            if c.fork is None:
                assert c.text == res.alone
                continue
            i = c.fork.position
            assert c.text[:i] == res.alone[:i] and c.text[i] == c.fork.token != c.fork.alone_token == res.alone[i]
            assert c.fork.gap_ulps >= 0 and c.fork.gap_ratio >= 0
    assert study.invariant.distinct == 1 and study.cost > 0


def test_settings_problems_are_named_per_field():
    assert ServeSettings().problems() == {}
    bad = ServeSettings(requests=0, max_batch=99, prompt="x" * (MAX_PROMPT + 1), dtype="float16", kernels="nope",
                        new_tokens=1)
    assert set(bad.problems()) == {"requests", "max_batch", "prompt", "dtype", "kernels", "new_tokens"}
    assert "alphabet" in ServeSettings(prompt="Hello!").problems()["prompt"]
    assert "'H'" in ServeSettings(prompt="Hello!").problems()["prompt"]
    with pytest.raises(ValueError):
        serve(ServeSettings(prompt="<b>"))


def test_cost_grows_with_the_workload_and_large_n_is_over_budget():
    small, big = serving_cost(ServeSettings(requests=10)), serving_cost(ServeSettings(requests=2000, new_tokens=110))
    assert small.work < big.work and small.fits and not big.fits


def test_serving_changes_no_global_state():
    before = GlobalState.capture()
    serve(ServeSettings(requests=3, **SHORT))
    assert GlobalState.capture() == before


def test_the_shipped_model_writes_text():
    """Greedy output from the shipped weights is made of the grammar's words and full stops."""
    words = set(" ".join(corpus.SUBJECTS + corpus.VERBS + corpus.OBJECTS + corpus.PLACES + corpus.TIMES
                         + corpus.FEELINGS + corpus.LINKS + ("was",)).split())
    text, _ = model_for("float32").generate(KERNELS["default"], encode("the cat"), 100)
    tokens = re.findall(r"[a-z]+", "the cat" + decode(text))[:-1]  # the last word may be cut off
    assert len(tokens) > 10 and sum(t in words for t in tokens) / len(tokens) > 0.9
    assert "." in decode(text)


def test_the_prompt_alphabet_is_the_models():
    assert set(corpus.generate(2000)) <= set(ModelConfig().vocab)


@pytest.mark.parametrize(("kernels", "dtype"), [("default", "float32"), ("gpu_model", "bfloat16"),
                                                ("batch_invariant", "float32")])
def test_the_largest_logit_move_is_measured_where_bits_moved(kernels, dtype):
    """max_move_ulps is 0 exactly where no logit row's bits moved, and positive where some did; at batch size 1
    nothing moves."""
    r = serve(ServeSettings(requests=6, max_batch=8, kernels=kernels, dtype=dtype, **SHORT))
    assert (r.max_move_ulps > 0) == (r.rows_bits_differ > 0)
    alone = serve(ServeSettings(requests=3, others=2, max_batch=1, kernels=kernels, dtype=dtype, **SHORT))
    assert alone.max_move_ulps == 0 and alone.rows_bits_differ == 0
