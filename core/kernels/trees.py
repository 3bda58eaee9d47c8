"""The reduction tree of a small sum: every partial sum, exact and rounded.

For n <= MAX_TREE_N, an order is written out as a binary tree. Each internal node adds
its two children's *rounded* values; the node records that exact sum, the value it
rounds to in the working format, and the rounding error introduced right there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.arith.formats import FORMATS, Exact, FloatFormat, round_to_format
from core.arith.metrics import exact_value
from core.arith.ulps import error_in_ulps
from core.kernels.orders import ORDERS, TreeShape

MAX_TREE_N = 32


def tree_shapes() -> dict[str, TreeShape]:
    """Every order that can be written out as a tree, by tree key (read from core.kernels.orders.ORDERS)."""
    return {o.tree.key: o.tree for o in ORDERS.values() if o.tree is not None}


TREE_ORDERS: dict[str, str] = {k: t.label for k, t in tree_shapes().items()}  # the pickers' labels


@dataclass(frozen=True, kw_only=True)
class Node:
    id: int
    left: int | None  # child node ids (None for a leaf)
    right: int | None
    leaf_index: int | None  # position in the vector, for leaves
    exact: Exact  # exact sum of the children's rounded values (the leaf's own value for leaves)
    rounded: Exact  # value after rounding to the working format
    depth: int  # distance from the leaves (0 for leaves)

    @property
    def error(self) -> Exact:
        if isinstance(self.rounded, float) or isinstance(self.exact, float):
            return 0 if self.rounded == self.exact else float("inf")
        return self.rounded - self.exact

    def error_ulps(self, fmt: FloatFormat) -> float:
        return 0.0 if self.leaf_index is not None else error_in_ulps(self.rounded, self.exact, fmt)


@dataclass(frozen=True, kw_only=True)
class Tree:
    order: str
    fmt: FloatFormat
    nodes: tuple[Node, ...]
    root: int

    @property
    def result(self) -> Exact:
        return self.nodes[self.root].rounded

    def internal(self) -> list[Node]:
        return [n for n in self.nodes if n.leaf_index is None]


class _Builder:
    def __init__(self, fmt: FloatFormat) -> None:
        self.fmt = fmt
        self.nodes: list[Node] = []

    def leaf(self, i: int, v: Exact) -> int:
        self.nodes.append(Node(id=len(self.nodes), left=None, right=None, leaf_index=i, exact=v, rounded=v, depth=0))
        return len(self.nodes) - 1

    def add(self, a: int, b: int) -> int:
        x, y = self.nodes[a].rounded, self.nodes[b].rounded
        exact = float(x) + float(y) if isinstance(x, float) or isinstance(y, float) else x + y
        rounded = round_to_format(exact, self.fmt)
        depth = 1 + max(self.nodes[a].depth, self.nodes[b].depth)
        self.nodes.append(
            Node(id=len(self.nodes), left=a, right=b, leaf_index=None, exact=exact, rounded=rounded, depth=depth)
        )
        return len(self.nodes) - 1

    def chain(self, ids: list[int]) -> int:
        acc = ids[0]
        for i in ids[1:]:
            acc = self.add(acc, i)
        return acc

    def balanced(self, ids: list[int]) -> int:
        level = ids
        while len(level) > 1:
            nxt = [self.add(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])  # carried up unchanged (equivalent to adding +0)
            level = nxt
        return level[0]


def build_tree(values: np.ndarray, working: str, order: str) -> Tree:
    """Write the chosen order (a tree key, see ``tree_shapes``) out as a tree over the values cast to
    the working dtype."""
    shape = tree_shapes().get(order)
    if shape is None:
        raise ValueError(f"no tree for order {order!r}")
    n = values.size
    if not 1 <= n <= MAX_TREE_N:
        raise ValueError(f"reduction trees are drawn for 1 to {MAX_TREE_N} values, not {n}")
    fmt = FORMATS[working]
    x = values.astype(fmt.numpy_dtype)
    b = _Builder(fmt)
    exact_vals = [exact_value(v, fmt) for v in x]
    leaf_order = [int(i) for i in shape.leaf_order(x)]
    leaves = {i: b.leaf(i, exact_vals[i]) for i in leaf_order}
    root = shape.combine(b, [leaves[i] for i in leaf_order])
    return Tree(order=order, fmt=fmt, nodes=tuple(b.nodes), root=root)
