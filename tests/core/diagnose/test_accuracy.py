"""Both results against a reference, and the claims the Diagnose page makes in words, each computed here
so that the test fails if the claim stops being true."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from core.arith.exact import exact_dot_fraction, exact_sum_fraction
from core.arith.formats import FLOAT32
from core.arith.ulps import error_in_ulps
from core.diagnose.accuracy import REF_ELEMENTS
from core.diagnose.examples import (
    LOG_LR,
    LOG_POINTS,
    LOG_STEPS,
    at_calm_lr,
    log_network,
    make_example,
    make_log_example,
    toy_training,
)
from core.diagnose.logs import diagnose_logs
from core.diagnose.verdict import DETERMINISTIC_DOCS, NEXT_CHECKS, diagnose, rel_text
from core.training.mlp import TrainSettings, forward, init_params, spirals


def _example(key):
    ex = make_example(key)
    return ex, diagnose(ex.actual, ex.expected, inputs=ex.inputs, reduction_length=ex.reduction_length)


def test_a_gpu_style_tree_sum_is_closer_to_the_exact_sum_than_a_left_to_right_loop():
    """The page's claim "a GPU's tree sum is often closer to the exact sum than a CPU's left-to-right loop",
    on its bundled example: every row's exact sum (Fractions) judges both, and the tree wins every row."""
    ex, d = _example("tree")
    acc = d.accuracy
    assert acc.source == "exact" and not acc.sampled and acc.elements.size == ex.actual.numel()
    assert acc.b_closer == acc.elements.size and acc.side_b.max_ulps < acc.side_a.median_ulps
    x = ex.inputs.numpy()
    for i in (0, 17, x.shape[0] - 1):  # the errors are exact: against Fractions, in ULPs of the exact sum
        exact = exact_sum_fraction(x[i])
        assert acc.err_a[i] == pytest.approx(abs(error_in_ulps(Fraction(float(ex.actual[i])), exact, FLOAT32)),
                                             rel=1e-12)
        assert acc.err_b[i] == pytest.approx(abs(error_in_ulps(Fraction(float(ex.expected[i])), exact, FLOAT32)),
                                             rel=1e-12)
    assert "Neither result is the reference" in acc.headline and "B is closer" in acc.headline


def test_exact_reference_of_a_product_samples_and_holds_reduced_precision_beyond_the_bound():
    """bfloat16 inputs give more error than any summation order of float32 sums allows; the float32 product
    stays within it. Neither is called expected: the words name result A and result B."""
    ex, d = _example("bfloat16")
    acc = d.accuracy
    assert acc.sampled and acc.elements.size == REF_ELEMENTS
    assert acc.side_a.beyond_bound > 0 and acc.side_b.beyond_bound == 0
    a, b = ex.inputs
    i = int(acc.elements[0])
    r, c = divmod(i, b.shape[1])
    exact = exact_dot_fraction(a[r].numpy(), b[:, c].numpy())
    assert acc.reference[0] == float(exact)
    assert acc.err_b[0] == pytest.approx(abs(error_in_ulps(Fraction(float(ex.expected.reshape(-1)[i])), exact,
                                                           FLOAT32)), rel=1e-12)
    words = " ".join((d.sentence, *d.reasons, acc.sentence, acc.headline))
    assert "expected" not in words.lower()


def test_a_given_reference_judges_both_and_must_fit_the_results():
    a = np.array([1.0000001, 2.0, 3.0000002, -4.0], np.float32)
    b = np.array([1.0, 2.0, 3.0, -4.0], np.float32)
    ref = np.array([1.00000005, 2.0, 3.0000001, -4.0])
    d = diagnose(a, b, reference=ref)
    acc = d.accuracy
    assert acc.source == "given" and acc.ref_fmt == "float64" and not acc.bound_rigorous
    for i in range(4):
        want_a = float(abs(Fraction(float(a[i])) - Fraction(ref[i])) / (Fraction(2) ** (math.frexp(ref[i])[1] - 24)))
        assert acc.err_a[i] == pytest.approx(want_a, rel=1e-9)
    assert acc.ties == 2 and acc.b_closer == 2
    assert diagnose(a, b).accuracy is None  # no reference and no inputs: nothing judges them
    with pytest.raises(ValueError, match="reference has shape"):
        diagnose(a, b, reference=np.ones(3))
    same = diagnose(a, b, reference=b).accuracy
    assert any("third result, not a judge" in n for n in same.notes)  # a float32 reference is no wider


def test_the_verdict_and_the_relative_metric_state_one_figure():
    """Four pasted values once read "at most 7.6e-08 relative" in the verdict beside 9.54e-07 in the metric:
    the verdict left out the elements near zero, the metric did not. Both now state ``rel_typical_max``."""
    a = np.array([1.0000001, 2.0, 3.0000002, -4.0], np.float32)
    b = np.array([1.0, 2.0, 3.0, -4.0], np.float32)
    d = diagnose(a, b)
    assert f"at most {rel_text(d.rel_typical_max)} relative" in d.sentence
    assert d.rel_stats.max > d.rel_typical_max  # the figures differ here: the element near zero is larger
    assert rel_text(d.rel_stats.max) not in d.sentence


def test_the_loss_log_example_trains_the_training_divergence_pages_network():
    """The caption's network is read from the code: the page's default width and classes, 2-D spiral inputs."""
    s = TrainSettings()
    x, _ = spirals(30, s.classes, 0)
    p = init_params(s.hidden, s.classes, 1)
    logits = forward(p, torch.from_numpy(x))
    assert log_network() == f"{x.shape[1]}-{s.hidden}-{s.hidden}-{logits.shape[1]}"
    a, _, _ = make_log_example("reordered")
    assert a.values.size == LOG_STEPS and LOG_POINTS > 0


def test_whether_training_amplifies_a_rounding_difference_depends_on_the_learning_rate():
    """The words no longer call training chaotic: the same reordered pair grows at the example's learning
    rate and stays rounding-sized at the Training divergence page's default one (full batch, 300 steps)."""
    steps = np.arange(1, LOG_STEPS + 1)

    def pair(lr):
        from core.diagnose.loaders import LossLog
        z = np.zeros(LOG_STEPS)
        return (LossLog(steps=steps, values=toy_training(lr=lr), resolution=z, source="a"),
                LossLog(steps=steps, values=toy_training(order_seed=3, lr=lr), resolution=z, source="b"))

    grown = diagnose_logs(*pair(LOG_LR))
    calm = diagnose_logs(*pair(TrainSettings().lr))
    assert grown.verdict == "amplified" and calm.verdict == "tiny"
    assert TrainSettings().lr != LOG_LR
    for d in (grown, calm):
        assert "chaotic" not in " ".join((d.sentence, *d.reasons))
    assert at_calm_lr().startswith(f"stays rounding-sized for all {LOG_STEPS} steps")  # what the page says


def test_the_deterministic_algorithms_advice_says_what_pytorch_documents():
    """torch switches an op to a deterministic implementation where one exists and raises only where none does
    (its documentation, cited); CUBLAS_WORKSPACE_CONFIG is needed by PyTorch 2.9 and older only (2.10 removed the
    check; the installed release's library holds no such string). On this CPU index_add_ runs, the same bits twice,
    with the switch on."""
    text = " ".join(NEXT_CHECKS)
    assert DETERMINISTIC_DOCS in text and "CUBLAS_WORKSPACE_CONFIG is :4096:8 or :16:8" in text
    assert "2.9 and older" in text and "from 2.10 the variable is no longer required" in text
    assert "it also needs the environment variable" not in text
    assert "only where none exists" in text and "makes torch raise where one is used" not in text
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        g = torch.Generator().manual_seed(0)
        src = torch.randn(10_000, generator=g)
        idx = torch.randint(0, 7, (10_000,), generator=g)
        one = torch.zeros(7).index_add_(0, idx, src)
        two = torch.zeros(7).index_add_(0, idx, src)
        assert torch.equal(one.view(torch.int32), two.view(torch.int32))
    finally:
        torch.use_deterministic_algorithms(before)
