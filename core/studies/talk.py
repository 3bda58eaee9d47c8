"""The talk's scenarios: prepared links that follow the story, each a page with its settings, then the deep dives.

The home page lists them as links (app.py), and scripts.serve opens each one to warm a server. One setting
is computed, not written down: the "GPU block tree" link's seed, the first whose vector makes the CPU's
pairwise tree and the GPU's block tree give different sums (core.studies.sumlab.differing_tree_seed). It is
found at the first call of ``scenarios``, not when a page imports ui.talk's presenter helpers, which every
page does.
"""

from __future__ import annotations

import functools

from core.kernels.orders import DEFAULT_ORDERS
from core.studies.sumlab import differing_tree_seed

Scenario = tuple[str, str, dict[str, str], str]  # (title, page file, link parameters, what the audience sees)


# No arguments: one tuple per process, its seed search (about 10 ms) run at the first call.
@functools.cache
def scenarios() -> tuple[Scenario, ...]:
    """The scenarios in the story's order, then the deep dives."""
    # a tree beside a tree that gives the same bits undercuts the point: the seed makes the two sums differ
    tree_seed = differing_tree_seed(32, "pairwise")
    return (
        ("0.1 + 0.2 + 0.3", "pages/non_associativity.py", {"preset": "0.1 + 0.2 + 0.3 (float64)"},
         "Two groupings of three decimals, one ULP apart, every rounding shown."),
        ("1 vs all threads", "pages/cpu_vs_gpu.py", {"vector": "normal", "n": "1000000", "format": "float32"},
         "A million float32 values summed by this CPU and in a GPU's order (a labelled model), then on 1 and all "
         "threads: see whether the bits change."),
        ("Your GPUs, the room's", "pages/cpu_vs_gpu.py",
         {"vector": "normal", "n": "1000000", "format": "float32", "room": "on"},
         "Everyone's own GPU sums the same million values in their browser; the speaker's screen counts the "
         "different answers, by vendor and architecture."),
        ("Watch two runs diverge", "pages/training_divergence.py", {"preset": "Hidden units reordered (SGD, lr 0.5)"},
         "Same network, reordered sums: press Play."),
        ("Same prompt, two answers", "pages/serving.py", {},
         "Identical requests to a tiny language model at temperature 0, batched with others: they fork."),
        ("Does float64 save the day?", "pages/mitigations.py", {},
         "The same sums and training pair in float64, with what it costs here."),
        ("Sum of a million float32", "pages/summation_lab.py", {"n": "1000000", "storage": "float32"},
         f"Deep dive: {len(DEFAULT_ORDERS)} summation orders of the same vector against the exact sum."),
        ("GPU block tree", "pages/summation_lab.py",
         {"n": "32", "seed": str(tree_seed),
          "orders": "sequential,pairwise,torch_all,cuda_model,correct", "permutations": "0", "tree": "pairwise"},
         "Deep dive: 32 values through a GPU's block reduction, beside the CPU's pairwise tree."),
    )
