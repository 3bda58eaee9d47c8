"""Every seeded setting takes the same seeds: whole numbers in [0, 2^63), never a bool or a float."""

from __future__ import annotations

import pytest

from core.arith.vectors import SEED_LIMIT, VectorSpec
from core.studies.assoc import SearchSettings
from core.studies.gpu_arithmetic import DotSpec
from core.training.mlp import TrainSettings

SETTINGS = [VectorSpec, DotSpec, SearchSettings, TrainSettings]


@pytest.mark.parametrize("kind", SETTINGS, ids=lambda k: k.__name__)
def test_the_same_seeds_are_taken_everywhere(kind):
    for seed in (0, 2**62, SEED_LIMIT - 1):
        kind(seed=seed).validate()
    for seed in (-1, SEED_LIMIT, True, 1.5):
        with pytest.raises(ValueError, match="seed must be a whole number between 0 and 2\\^63 - 1"):
            kind(seed=seed).validate()
