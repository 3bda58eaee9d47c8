"""The orders of the WebGPU kernels that the app runs on a visitor's own GPU, as models computed here.

The shaders sit in ui/gpu_kernels/ and run in the visitor's browser; this module is what the server knows of
them. Each kernel's order is stated once, here, in the same words the page shows:

- ``sequential``: one invocation adds x[0], x[1], ... left to right in float32: the CPU's left-to-right order.
- ``workgroup tree``: GROUPS workgroups of WORKGROUP invocations; invocation t of workgroup g starts at
  element g*WORKGROUP + t and adds every (WORKGROUP*GROUPS)-th element left to right (a lane with no element
  holds +0). Each workgroup then halves its WORKGROUP lane sums in shared memory, sh[t] += sh[t + s] for
  s = WORKGROUP/2, ..., 1, and a second pass adds the GROUPS workgroup sums left to right in one invocation.
  ``workgroup_tree`` computes exactly that, so its bits are a prediction the browser's result is checked
  against.
- ``subgroup``: the same lanes, combined by the hardware's ``subgroupAdd``, whose order is the GPU's own.
- ``atomic``: the workgroup sums added to one float with a compare-exchange loop, in whatever order the
  workgroups finish: a different order, and possibly different bits, on every run.

The last two have no model: a result is checked against the rigorous bound that holds for any order.
"""

from __future__ import annotations

import numpy as np

from core.kernels.sums import sequential

WORKGROUP = 256  # invocations per workgroup: the most WebGPU guarantees (maxComputeInvocationsPerWorkgroup)
GROUPS = 64  # workgroups in the tree, subgroup and atomic kernels
LANES = WORKGROUP * GROUPS
ATOMIC_RUNS = 8  # the atomic kernel runs this many times on the same data
MAX_ELEMENTS = 10_000_000  # the page's largest vector; a report for more is refused


def halving_tree(x: np.ndarray) -> np.ndarray | np.generic:
    """Each row of ``x`` (a power-of-two length) reduced as a GPU workgroup does in shared memory:
    x[t] += x[t + s] for s = len/2, len/4, ..., 1; returns x[0] of each row. Depth log2(len)."""
    level = x.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        while level.shape[-1] > 1:
            half = level.shape[-1] // 2
            level = level[..., :half] + level[..., half:]
    return level[..., 0][()]


def lane_sums(x: np.ndarray, lanes: int = LANES) -> np.ndarray:
    """Lane j's left-to-right sum of x[j], x[j + lanes], ..., as the kernel's invocations compute it: starting
    from x[j] itself (so a lone -0 stays -0), +0 for a lane with no element; no padding is ever added."""
    n = x.size
    acc = np.zeros(lanes, dtype=x.dtype)
    first = min(n, lanes)
    acc[:first] = x[:first]
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(lanes, n, lanes):  # one vectorized step per round: n / lanes steps
            row = x[start:start + lanes]
            acc[:row.size] += row
    return acc


def workgroup_tree(x: np.ndarray, workgroup: int = WORKGROUP, groups: int = GROUPS) -> np.generic:
    """The modelled WebGPU workgroup-tree kernel (module docstring), every addition in x's dtype; other shapes
    than the shader's are for tests that write the shader's order out by hand."""
    partials = halving_tree(lane_sums(x, workgroup * groups).reshape(groups, workgroup))
    return sequential(partials)


def workgroup_tree_depth(n: int) -> int:
    """Additions on the longest path of ``workgroup_tree``: a lane's additions, the tree's levels, the final
    left-to-right pass over the workgroups."""
    rounds = -(-n // LANES) if n else 0
    return max(rounds - 1, 0) + (WORKGROUP - 1).bit_length() + (GROUPS - 1)
