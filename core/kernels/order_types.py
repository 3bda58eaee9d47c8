"""The types an order of summation is made of: its entry (``Order``), its input and output, and the shapes
in which other modules reuse it (a tree of additions, many short rows). core.kernels.orders holds the
registry of entries; these types are what an entry is built from."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from core.arith.metrics import BoundKind


@dataclass(frozen=True, kw_only=True)
class Ran:
    """What an order's function returns."""

    value: np.generic  # in the working dtype (torch's result dtype for the real torch sums)
    depth: int | None = None  # additions on the longest path, for the "tree" and "compensated" bounds
    provenance: str | None = None  # the whole provenance line; None: the origin's line ...
    note: str = ""  # ... followed by this


@dataclass(frozen=True, kw_only=True)
class SumInput:
    """An order's input: the stored values, the same values in the working dtype, and context."""

    values: np.ndarray  # as stored
    x: np.ndarray  # cast to the working dtype
    working: str
    threads: int  # torch's intra-op threads in this process


@dataclass(frozen=True, kw_only=True)
class TreeShape:
    """How an order is written out addition by addition for a small vector (core.kernels.trees).

    ``leaves(x)``: the order in which the values enter (indices; None: as stored); ``combine(builder, ids)``:
    adds them with ``builder.add(a, b)`` (or its ``chain`` and ``balanced`` helpers) and
    returns the root. ``key`` names the tree (a link field's value), ``label`` the picker's text.
    """

    key: str
    label: str
    combine: Callable
    leaves: Callable[[np.ndarray], Sequence[int]] | None = None  # None: in the stored order

    def leaf_order(self, x: np.ndarray) -> Sequence[int]:
        return range(x.size) if self.leaves is None else self.leaves(x)


@dataclass(frozen=True, kw_only=True)
class RowShape:
    """How an order sums every row of an (E, n) array at once, each addition rounding to the array's dtype,
    with the bits of each row summed alone: core.diagnose.simulate recomputes sampled outputs of a user's
    matrix product this way, every order with a ``RowShape`` one column, named ``label`` there."""

    label: str
    run: Callable[[np.ndarray], np.ndarray]


class OrderBytes(NamedTuple):
    """Bytes an order holds on top of the vector, per value: ``per_item`` times the working format's
    item size, plus ``extra`` bytes."""

    per_item: float
    extra: float


@dataclass(frozen=True, kw_only=True)
class Order:
    key: str
    name: str
    origin: str
    bound: BoundKind  # which a-priori bound applies; the registry may name it by its value ("tree")
    description: str
    run: Callable[[SumInput], Ran]
    # core.crowd.budget's weights, measured by benchmarks/bench_budget.py: work per value, by the name of
    # the working format, and the bytes held on top of the vector
    work: Mapping[str, float]
    memory: OrderBytes
    tree: TreeShape | None = None
    rows: RowShape | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", BoundKind(self.bound))  # a name that is no BoundKind fails here


@dataclass(frozen=True, kw_only=True)
class OrderOutcome:
    key: str
    value: np.generic  # in the working dtype (torch's result dtype for the real torch sums)
    seconds: float
    provenance: str
    tree_depth: int | None = None  # additions on the longest path, for the "tree" bound
