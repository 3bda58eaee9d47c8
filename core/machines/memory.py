"""How much memory this machine has free for new processes, and how much a running process holds.

Read from Linux's /proc and the container's cgroup files (v2, then v1); where none of them can be
read (another system), the answer says so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Room:
    available_bytes: int | None  # None: nothing here reports free memory
    source: str


def proc_kib(path: str, field: str) -> int | None:
    """The value of a ``field:  N kB`` line of a /proc file, in bytes; None when unreadable or absent."""
    try:
        with open(path) as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith(field)), None)
    except OSError:
        return None


def proc_memory(pid: int) -> tuple[int, int | None]:
    """(RSS, PSS or None) of a process in bytes, from /proc; (0, None) when it cannot be read."""
    rss = proc_kib(f"/proc/{pid}/status", "VmRSS:")
    if rss is None:
        return 0, None
    return rss, proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


def memory_room() -> Room:
    """Free memory for new processes: the tighter of the container's limit and the machine's MemAvailable."""
    found: list[tuple[int, str]] = []
    for limit_file, usage_file, what in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "the container's memory limit (cgroup v2)"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
         "the container's memory limit (cgroup v1)"),
    ):
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:
            found.append((max(0, int(limit) - usage), what))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024, "the machine's available memory"))
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        return Room(None, "nothing on this machine reports free memory")
    avail, source = min(found)
    return Room(avail, source)
