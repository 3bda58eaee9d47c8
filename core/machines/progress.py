"""How a long computation says how far it has got: one record, one callback type, for every study,
training run and measurement in core.

A computation that takes long accepts ``on_progress: OnProgress | None`` and calls it with a
``Progress`` between pieces of its work. The callback may raise to stop the computation: a page
whose visitor clicked elsewhere is stopped that way by Streamlit, inside the callback, and the
exception passes through the computation unchanged (what a stopped computation had finished is
whatever its own docstring says it keeps).

``done`` and ``total`` count the computation's own units (steps, orders, devices, ranks...), so a
bar is ``fraction`` full; ``what`` names the piece of work that comes next or has just ended, for a
person. A computation with more to say (the workers of a live data-parallel run, their memory)
reports a subclass, which every callback still reads as a Progress.

It lives in core.machines, the lowest package that reports progress (core.machines.timing), and
imports nothing from core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Progress:
    done: float  # units finished
    total: float  # units in all
    what: str = ""  # the piece of work, in words

    @property
    def fraction(self) -> float:
        """How full a bar is: done / total, kept within 0 and 1 (0 for an empty total)."""
        return min(1.0, max(0.0, self.done / self.total)) if self.total > 0 else 0.0


OnProgress = Callable[[Progress], None]


def report(on_progress: OnProgress | None, *, done: float, total: float, what: str = "") -> None:
    """Call ``on_progress`` with that Progress, if there is a callback (what every computation does)."""
    if on_progress is not None:
        on_progress(Progress(done=done, total=total, what=what))


def offset(on_progress: OnProgress | None, *, before: float, total: float) -> OnProgress | None:
    """A callback for one part of a larger computation: the part's ``done`` counted after ``before``
    units of the whole, out of ``total``; its ``what`` is kept."""
    if on_progress is None:
        return None
    return lambda p: on_progress(Progress(done=before + p.done, total=total, what=p.what))
