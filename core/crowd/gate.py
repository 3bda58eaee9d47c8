"""At most a few heavy computations at once, server-wide, first come first served.

One process serves every viewer. Five visitors each summing 10^7 values in every order at
once would each get a fifth of the CPU and hold their memory for five times as long; with
the gate, ``slots`` of them run at full speed while the others wait their turn, and requests
below the heavy threshold (core.crowd.budget) never touch the gate, so they never wait behind
heavy ones.

A waiting thread wakes every ``poll`` seconds (or as soon as a slot frees) and reports how
many computations are ahead of it through ``on_wait``; a page shows that number, and since
showing it is a Streamlit call, a visitor who left or changed a setting stops waiting there
(the exception ``on_wait`` raises removes the waiter from the queue). A slot is released
however the block inside it ends. Nothing here imports streamlit.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Gate:
    """A counting gate with a FIFO queue, re-entrant per thread, that reports its queue."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("a gate needs at least one slot")
        self.slots = slots
        self._cond = threading.Condition()
        self._inside = 0
        self._queue: deque[object] = deque()
        self._local = threading.local()
        self.max_inside_seen = 0  # for tests and reports
        self.admitted = 0

    @property
    def inside(self) -> int:
        with self._cond:
            return self._inside

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._queue)

    def _admit_or_count(self, ticket: object) -> int | None:
        """Under the lock: take a slot (None) or return how many are ahead (inside + queued before us)."""
        ahead = self._queue.index(ticket)
        if ahead == 0 and self._inside < self.slots:
            self._queue.popleft()
            self._inside += 1
            self.admitted += 1
            self.max_inside_seen = max(self.max_inside_seen, self._inside)
            self._cond.notify_all()  # the next in line may fit too
            return None
        return self._inside + ahead

    @contextmanager
    def hold(self, on_wait: Callable[[int], None] | None = None, poll: float = 0.25) -> Iterator[int]:
        """Run the block in a slot; yields how many others it waited for at first (0: none).

        ``on_wait(k)`` is called right away when the block must wait and then about every
        ``poll`` seconds with the current number ``k`` of computations ahead; it may raise to
        give up waiting. A thread already inside the gate re-enters without waiting.
        """
        if getattr(self._local, "depth", 0):
            self._local.depth += 1
            try:
                yield 0
            finally:
                self._local.depth -= 1
            return
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            ahead = self._admit_or_count(ticket)
        first = ahead or 0
        try:
            while ahead is not None:
                if on_wait is not None:
                    on_wait(ahead)
                with self._cond:
                    ahead = self._admit_or_count(ticket)
                    if ahead is not None:
                        self._cond.wait(timeout=poll)
                        ahead = self._admit_or_count(ticket)
        except BaseException:
            with self._cond:
                if ticket in self._queue:  # still waiting: leave the queue, let the next one in
                    self._queue.remove(ticket)
                    self._cond.notify_all()
                elif ahead is None:  # admitted just before the exception: give the slot back
                    self._release()
            raise
        self._local.depth = 1
        try:
            yield first
        finally:
            self._local.depth = 0
            with self._cond:
                self._release()

    def _release(self) -> None:
        self._inside -= 1
        self._cond.notify_all()


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


# Heavy computations at once: leave at least one core to everyone else, and never more than two
# (the memory budget in core.crowd.budget is sized for two). On the 2-core hosting tier: one.
HEAVY_SLOTS = max(1, min(2, _usable_cpus() - 1))
HEAVY = Gate(HEAVY_SLOTS)
