"""Which steps a long training chart draws: at most about a given number of rows, every spike and dip kept.

The steps are cut into equal slices, and each slice keeps, for each drawn series, the step where the
series is lowest and the step where it is highest (NaN ignored, ±inf kept), with the first and last steps:
each line keeps its shape. How many rows a chart may draw is the drawing's choice (ui.training_view).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _first_extremes(values: np.ndarray, starts: np.ndarray, extreme: np.ufunc) -> np.ndarray:
    """The position of the first lowest (``np.minimum``) or highest (``np.maximum``) value of each slice of
    ``values`` (no NaN), the slices starting at ``starts``: a tie goes to the earliest step."""
    lengths = np.diff(np.append(starts, values.size))
    slice_of = np.repeat(np.arange(starts.size), lengths)
    hits = np.flatnonzero(values == np.repeat(extreme.reduceat(values, starts), lengths))
    first = np.ones(hits.size, dtype=bool)
    first[1:] = slice_of[hits[1:]] != slice_of[hits[:-1]]
    return hits[first]


def thinned_rows(series: Sequence[np.ndarray], size: int, limit: int) -> np.ndarray:
    """The positions, in order, of the rows a chart of ``series`` (each ``size`` float64 values, one per
    step) draws: every row when ``size <= limit`` or there is no series; otherwise ``limit // (2 *
    len(series))`` equal slices of steps, each keeping the first lowest and the first highest value of
    every series (NaN ignored, ±inf kept), and the first and last rows: at most about ``limit``."""
    if size <= limit or not series:
        return np.arange(size)
    slices = max(1, limit // (2 * len(series)))
    slice_of = (np.arange(size) * slices) // size
    starts = np.flatnonzero(np.diff(slice_of, prepend=-1))
    keep = np.zeros(size, dtype=bool)
    keep[[0, size - 1]] = True
    for values in series:
        v = np.asarray(values, dtype=np.float64)
        keep[_first_extremes(np.where(np.isnan(v), np.inf, v), starts, np.minimum)] = True
        keep[_first_extremes(np.where(np.isnan(v), -np.inf, v), starts, np.maximum)] = True
    return np.flatnonzero(keep)
