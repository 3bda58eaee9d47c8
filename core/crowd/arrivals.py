"""How many page runs the server is making at once, and what one costs: what a visitor who arrives with a
crowd is told about the wait.

A page run holds the interpreter for most of its CPU time, so the runs in progress share about one core,
however many cores the machine has: a newcomer's page is drawn after roughly the CPU time of the runs
ahead of it. Each run's own CPU time (its thread's) is measured as it ends; the estimate uses the median
of the last ``window`` runs, so one long computation (a training run, a measurement) does not make every
later estimate large. A run's thread is not all a view costs (the server sends what it drew from another
thread), so while runs are in progress the wall time that the runs ended in the last ``recent_s`` seconds
took counts too: a newcomer in the same crowd waits about as long. Nothing here imports streamlit.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Crowd:
    """What a run found when it started: the runs already in progress and the median CPU time of a run."""

    ahead: int  # runs in progress when this one started (its own not counted)
    cpu_per_run_s: float  # median CPU seconds of the last runs (0 before any has ended)
    measured_runs: int  # how many runs that median is over
    recent_wall_s: float = 0.0  # median wall time of the runs that ended in the last seconds (0: none)

    @property
    def wait_s(self) -> float:
        """About how long this run will take: the CPU time of the runs ahead, or, with runs ahead, what the
        runs just ended took, whichever is longer. An estimate, not a measurement."""
        return max(self.ahead * self.cpu_per_run_s, self.recent_wall_s if self.ahead else 0.0)


class Arrivals:
    """A thread-safe count of the runs in progress and a window of the CPU time the last runs took."""

    def __init__(self, window: int = 64, recent_s: float = 10.0) -> None:
        if window < 1:
            raise ValueError("the window holds at least one run")
        self._lock = threading.Lock()
        self._running = 0
        self._cpu: deque[float] = deque(maxlen=window)
        self._walls: deque[tuple[float, float]] = deque(maxlen=window)  # (when it ended, its wall seconds)
        self.recent_s = recent_s

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

    def snapshot(self) -> Crowd:
        with self._lock:
            return self._crowd(self._running)

    def _crowd(self, ahead: int) -> Crowd:
        cpu = statistics.median(self._cpu) if self._cpu else 0.0
        since = time.monotonic() - self.recent_s
        recent = [wall for ended, wall in self._walls if ended >= since]
        return Crowd(ahead=ahead, cpu_per_run_s=cpu, measured_runs=len(self._cpu),
                     recent_wall_s=statistics.median(recent) if recent else 0.0)

    @contextmanager
    def run(self) -> Iterator[Crowd]:
        """Count the block as a run in progress and time its thread's CPU; yields what it found on arrival.
        The count is given back however the block ends (a rerun or a stop raises through it)."""
        with self._lock:
            crowd = self._crowd(self._running)
            self._running += 1
        started, began = time.thread_time(), time.monotonic()
        try:
            yield crowd
        finally:
            used, ended = time.thread_time() - started, time.monotonic()
            with self._lock:
                self._running -= 1
                self._cpu.append(used)
                self._walls.append((ended, ended - began))


ARRIVALS = Arrivals()  # the process's page runs (app.py counts each)
