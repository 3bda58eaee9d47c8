"""Tables and chart data for the summation lab, built from core result objects."""

from __future__ import annotations

import math

import pandas as pd

from core.exact import shortest_repr
from core.formats import hex_bits, ulp
from core.metrics import SumMetrics, exact_value
from core.sumlab import LabResult, RunningError, bound_in_ulps
from core.trees import Tree


def _fmt_float(x: float | None, spec: str) -> str:
    if x is None:
        return "undefined (exact sum is 0)"
    if math.isinf(x):
        return "∞"
    if math.isnan(x):
        return "undefined"
    return format(x, spec)


NO_BOUND = "no finite bound (n·u ≥ 1, or non-finite data)"


def _bound_text(m: SumMetrics) -> str:
    if m.bound is None:
        return NO_BOUND
    return f"{float(m.bound):.3e}"


def _bound_ulps_text(m: SumMetrics, exact, fmt) -> str:
    b = bound_in_ulps(m.bound, exact, fmt)
    if b is None:
        return NO_BOUND if m.bound is None else "—"
    return f"±{b:.4g}"


def _abs_text(m: SumMetrics) -> str:
    return "∞" if isinstance(m.abs_error, float) and math.isinf(m.abs_error) else f"{float(m.abs_error):.3e}"


def _within(m: SumMetrics) -> str:
    if m.overflowed:
        return "overflow"
    if m.within_bound is None:
        return "—"
    return "yes" if m.within_bound else "NO (bug)"


def results_table(r: LabResult) -> pd.DataFrame:
    fmt = r.fmt
    rows = []
    for row in r.rows:
        m = row.metrics
        rows.append({
            "order": row.order.name,
            "origin": row.order.origin,
            "value": shortest_repr(m.value, fmt),
            "bits": hex_bits(m.bits, fmt),
            "error (ULPs)": _fmt_float(m.ulps, "+.4g"),
            "a-priori bound (ULPs)": _bound_ulps_text(m, r.exact, fmt),
            "relative error": _fmt_float(m.rel_error, ".3e"),
            "correct digits": _fmt_float(m.correct_digits, ".1f"),
            "|error| (absolute)": _abs_text(m),
            "a-priori bound (absolute)": _bound_text(m),
            "within bound": _within(m),
            "provenance": row.outcome.provenance,
            "time (ms)": round(row.outcome.seconds * 1e3, 2),
        })
    return pd.DataFrame(rows)


def error_frame(r: LabResult) -> pd.DataFrame:
    rows = []
    for row in r.rows:
        u = row.metrics.ulps
        if math.isfinite(u):
            rows.append({"order": row.order.name, "origin": row.order.origin, "ulps": u, "abs_ulps": abs(u),
                         "value": shortest_repr(row.metrics.value, r.fmt)})
    return pd.DataFrame(rows, columns=["order", "origin", "ulps", "abs_ulps", "value"])


def permutation_frames(r: LabResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Histogram data (each permutation's error in ULPs) and marks for the other orders."""
    study = r.permutations
    assert study is not None and not isinstance(r.exact, float)
    unit = ulp(r.exact, r.fmt)
    values = [exact_value(v, r.fmt) for v in study.values]
    errors = [float((v - r.exact) / unit) for v in values if not isinstance(v, float)]  # overflowed sums left out
    hist = pd.DataFrame({"ulps": errors})
    marks = [{"label": "exact sum", "ulps": 0.0}]
    for row in r.rows:
        if math.isfinite(row.metrics.ulps):
            marks.append({"label": row.order.name, "ulps": row.metrics.ulps})
    return hist, pd.DataFrame(marks)


def running_frame(re: RunningError) -> pd.DataFrame:
    return pd.DataFrame({
        "values summed": re.positions,
        "|error|": re.abs_error,
        "bound γ(k−1)·Σ|x|": re.bound,
        "error (ULPs)": re.ulps,
    })


def tree_frames(tree: Tree) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Node positions, edges, and a table of every addition."""
    fmt = tree.fmt
    x: dict[int, float] = {}
    leaf_rank = 0
    for node in tree.nodes:
        if node.leaf_index is not None:
            x[node.id] = float(leaf_rank)
            leaf_rank += 1
    for node in tree.nodes:  # children always precede parents
        if node.leaf_index is None:
            x[node.id] = (x[node.left] + x[node.right]) / 2
    nodes, edges, table = [], [], []
    for node in tree.nodes:
        is_leaf = node.leaf_index is not None
        u = node.error_ulps(fmt)
        label = f"x[{node.leaf_index}]" if is_leaf else f"node {node.id}"
        nodes.append({"id": node.id, "x": x[node.id], "y": node.depth, "label": label,
                      "exact": shortest_repr(node.exact, fmt) if is_leaf else _exact_text(node.exact),
                      "rounded": shortest_repr(node.rounded, fmt), "ulps": u, "abs_ulps": abs(u)})
        if not is_leaf:
            for child in (node.left, node.right):
                edges.append({"x": x[node.id], "y": node.depth, "x2": x[child], "y2": tree.nodes[child].depth})
            table.append({"addition": f"{_name(tree, node.left)} + {_name(tree, node.right)}",
                          "exact sum": _exact_text(node.exact), "rounded": shortest_repr(node.rounded, fmt),
                          "rounding error": _exact_text(node.error), "error (ULPs)": f"{u:+.3g}"})
    return pd.DataFrame(nodes), pd.DataFrame(edges), pd.DataFrame(table)


def _name(tree: Tree, node_id: int) -> str:
    n = tree.nodes[node_id]
    return f"x[{n.leaf_index}]" if n.leaf_index is not None else f"node {n.id}"


def _exact_text(v) -> str:
    from core.exact import abbreviate, exact_decimal

    return abbreviate(exact_decimal(v), 40)
