"""The training text: simple English sentences written by a seeded grammar.

The grammar below is this project's own (written for it; no outside text), so the corpus is
under the project's license. Its sentences have genuine branch points: after "the" any of
several nouns may follow with the same probability, after a verb any object, and so on. A
model trained on it learns nearly equal odds for those continuations, which is where a
temperature-0 decoder can go either way when the logits move by an ULP.
"""

from __future__ import annotations

import random

SUBJECTS = ("the cat", "the dog", "a little bird", "the old man", "my sister", "the farmer", "a small boy",
            "the teacher", "her brother", "the baker", "a tired fox", "the girl")
VERBS = ("saw", "found", "liked", "carried", "painted", "lost", "wanted", "pulled", "washed", "kept")
OBJECTS = ("a red ball", "the big tree", "a blue cup", "the green door", "a warm coat", "the old boat",
           "a bag of apples", "the yellow kite", "a long rope", "the white hat")
PLACES = ("in the garden", "by the river", "at the market", "near the school", "on the hill", "in the kitchen",
          "under the bridge", "at home")
TIMES = ("in the morning", "at night", "after lunch", "on sunday", "every day", "before dinner")
FEELINGS = ("happy", "sad", "tired", "hungry", "glad", "cold")
LINKS = ("and then", "so", "but", "because")

DEFAULT_SEED = 2026
DEFAULT_CHARS = 48_000
DESCRIPTION = ("simple English sentences from a seeded grammar written for this project "
               "(core/serving/corpus.py; no outside text, the project's license)")


def sentence(rng: random.Random) -> str:
    """One sentence: subject, verb, object, place or time, sometimes a second clause."""
    s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
    r = rng.random()
    if r < 0.4:
        s += f" {rng.choice(PLACES)}"
    elif r < 0.7:
        s += f" {rng.choice(TIMES)}"
    if rng.random() < 0.35:
        s += f", {rng.choice(LINKS)} {rng.choice(SUBJECTS)} was {rng.choice(FEELINGS)}"
    return s + "."


def generate(n_chars: int = DEFAULT_CHARS, seed: int = DEFAULT_SEED) -> str:
    """About ``n_chars`` characters of sentences, the same text for the same seed on every machine."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_chars:
        s = sentence(rng)
        parts.append(s)
        size += len(s) + 1
    return " ".join(parts) + "\n"


def prompts(rng: random.Random, k: int) -> list[str]:
    """``k`` prompts like the corpus's openings (the other requests on the server)."""
    out = []
    for _ in range(k):
        p = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)}"
        if rng.random() < 0.5:
            p = f"{p} {rng.choice(OBJECTS)}"
        out.append(p)
    return out
