"""Where in the model an op runs: its module path, as a trace names it.

The path is the deepest module running when the op is dispatched (core.traces.oprules.OrderedTracker says
which modules run, and in which order they were entered), with the root module named ``model``; outside
every module it is the label of the innermost ``scope`` (the optimizer's step), else ``model``.
"""

from __future__ import annotations

import contextlib
import threading

from torch.utils.module_tracker import ModuleTracker

_local = threading.local()


@contextlib.contextmanager
def scope(label: str):
    """Ops run inside get ``label`` as their module path when no module is active (the optimizer).
    Per thread."""
    stack = _local.__dict__.setdefault("scope", [])
    stack.append(label)
    try:
        yield
    finally:
        stack.pop()


def _current_scope() -> str | None:
    stack = _local.__dict__.get("scope")
    return stack[-1] if stack else None


class ModulePath:
    """The module path of the op being recorded, from ``tracker``'s running modules; ``root_name``: the
    class name of the root module, which a path names ``model``."""

    def __init__(self, tracker: ModuleTracker, root_name: str) -> None:
        self.tracker = tracker
        self.root_name = root_name
        self._where: tuple = (None, "")  # (the tracker's count of changes, scope), the module path then

    def current(self) -> str:
        """The path, kept while the running modules and the scope are the same (most ops run where the one
        before them ran)."""
        changes = getattr(self.tracker, "changes", None)
        key = (changes, _current_scope())
        if changes is not None and self._where[0] == key:
            return self._where[1]
        where = self.deepest()
        self._where = (key, where)
        return where

    def deepest(self) -> str:
        """The path, worked out afresh."""
        parents = [p for p in list(self.tracker.parents) if p != "Global"]
        if not parents:
            return _current_scope() or "model"
        # the deepest; among modules of one depth (siblings in the backward pass), the one entered last, whose
        # backward is running now; the name breaks a tie no entry order can make
        entered = getattr(self.tracker, "entered", {})
        deepest = max(parents, key=lambda p: (p.count("."), entered.get(p, 0), p))
        head, _, rest = deepest.partition(".")
        return "model" + ("." + rest if rest else "") if head == self.root_name else deepest
