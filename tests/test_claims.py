"""The app's words, read as a visitor reads them: no sentence that a numerical analyst found wrong or overstated
comes back, and each cause the story must teach is still said where the story reaches it.

The text is every string literal of app.py, pages/, ui/ and core/ (adjacent literals joined, as Python joins
them, and f-strings' literal parts) and every Markdown file under docs/ and the README, whitespace collapsed
and lower-cased, so a sentence split across source lines is still found."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

from core.studies.reproducible_rules import Choice, answer
from core.training.mlp import PRESETS, TrainSettings
from core.training.pair import PairedRun

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _literals(path: pathlib.Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):  # an f-string: its literal parts, the fields as a space
            out.append(" ".join(v.value if isinstance(v, ast.Constant) else " " for v in node.values))
    return out


def _corpus() -> dict[str, str]:
    files = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py")),
             *sorted((ROOT / "core").rglob("*.py"))]
    texts = {str(p.relative_to(ROOT)): " ".join(_literals(p)) for p in files}
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        texts[str(p.relative_to(ROOT))] = p.read_text(encoding="utf-8")
    return {k: re.sub(r"\s+", " ", v).lower() for k, v in texts.items()}


CORPUS = _corpus()
ALL = " ".join(CORPUS.values())

# what was wrong or overstated, in the words it was said in
WRONG = [
    "every order is accurate to a few ulps",  # kappa = 1 is no cancellation, not no error
    "the neighbouring number of the exact answer",  # only where the exact answer is representable
    "both learn equally well",  # training chaos overstated
    "does not depend on which side",
    "because training is chaotic",
    "diverge completely",
    "makes torch raise where one is used",  # it switches to a deterministic kernel where one exists
    "does the same one step up",  # 16-bit sums already accumulate in float32
    "by an ulp or so",  # measured on a tiny model, not generalised
    "deterministic only for a fixed batch",  # padding, lengths, chunked prefill, a prefix cache
    "take float16/bfloat16 inputs and accumulate in float32",  # float16 MMA may accumulate in float16
    "every honest reordering",  # the tolerance is an envelope, not a proof
    "float64 saves the day",  # it postpones the divergence; it does not cure it
    "split every sum and matrix product differently",
]


@pytest.mark.parametrize("phrase", WRONG)
def test_no_wrong_claim_comes_back(phrase):
    assert [name for name, text in CORPUS.items() if phrase in text] == []


# the causes and caveats the story teaches, each by words that only its lesson uses
TAUGHT = {
    "not every difference is a sum's order": ["not every difference is a sum's order", "fma contraction",
                                              "allow_tf32", "torch.compile fuses"],
    "same seed, other random numbers": ["mersenne twister", "philox", "draw on the cpu, then move the tensor"],
    "reproducible is not accurate": ["neither device is the reference", "neither result is the reference"],
    "float64 postpones": ["postponed, not cured", "postpones"],
}


@pytest.mark.parametrize("cause", list(TAUGHT))
def test_each_cause_is_still_taught(cause):
    assert [w for w in TAUGHT[cause] if w not in ALL] == []


def test_a_cpu_and_a_gpu_differ_in_their_math_libraries_too():
    """What cannot be had says every reason it cannot: the orders of sums, and the functions' own roundings."""
    cannot = " ".join(answer(Choice(target="cpu_gpu")).cannot)
    assert "exp" in cannot and "split sums" in cannot


def test_the_preset_notes_numbers_are_the_models_own():
    """The Butterfly preset's count of initial weights, and bfloat16's roundings 2^16 times float32's."""
    run = PairedRun(TrainSettings())
    weights = sum(p.numel() for p in run.a.params.values())
    notes = {p.name: p.note for p in PRESETS.values()}
    assert f"One of {weights:,} initial weights" in notes["Butterfly: one weight moved by one ULP"]
    assert 2 ** (24 - 8) == 65_536 and "about 65,000 times coarser" in notes["bfloat16 autocast"]
