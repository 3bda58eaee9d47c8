"""Settings of the native libraries under torch, chosen before torch loads (they are read once).

**OpenMP's wait policy.** torch runs its intra-op threads on OpenMP, whose threads by default spin
for a while after each parallel region, waiting for the next. The app runs thousands of tiny ops (a
2-64-64-3 network, a language model of 96 dimensions) for many visitors on a server of two or so
cores: a spinning thread takes the core that another thread of the same team, or another visitor,
needs. Measured on the 2-core development VM, a 500-step training pair took 3.6 s with the default
policy and 1.0 s with passive waits, idle; with the second core busy, 54 s against 1.2 s; a sum of
10^7 float32 values took 5.4 ms and 1.9 ms. The policy changes how idle threads wait, never how work
is split among them, so every result keeps its bits. ``OMP_WAIT_POLICY=PASSIVE``.

**oneDNN's caches.** torch's bfloat16 matrix products on a CPU go through oneDNN, which compiles a
kernel for each product shape and keeps it, with its buffers, in two caches of 1,024 entries each
(oneDNN's primitive cache, ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, and ideep's, ``LRU_CACHE_CAPACITY``).
A server with dynamic batching meets a new shape at almost every step (batch size times prompt
length): one serving run at the Serving page's defaults made about 300 shapes and left the process
175 MB larger, measured on the 2-core development VM (AVX-512 with bfloat16); with 64 entries each,
45 MB, at the same speed within the run-to-run spread. A cache holds compiled code and workspace,
never results: a product computes the same bits whether its kernel was kept or compiled again.

**numba's vector maths.** Where Intel's SVML library is installed, numba hands the transcendental
functions of vectorised loops to it, whose results can differ in the last bit from the C library's scalar
ones used for the rest of a loop. The batch-invariant kernels (core.serving.fused) promise one
rounding for every element, so ``NUMBA_DISABLE_INTEL_SVML=1``: the C library everywhere.

**glibc's allocator.** Each Streamlit script run is a new thread, and glibc gives threads their own
malloc arenas (up to eight per core). Memory a finished computation freed stays in its thread's
arena, counted in the server's private memory, where the next visitor's thread does not reuse it.
So this module allows one arena (``mallopt(M_ARENA_MAX, 1)``, at import: the ``MALLOC_ARENA_MAX``
variable would have to be set before the process starts), and app.py hands the free pages back
after every script run (``release_freed_memory``, glibc's ``malloc_trim``). Measured on the 2-core
development VM with every page opened at its defaults (benchmarks/bench_hosting.py): 516 MB private
at glibc's defaults, 453-465 MB with these. A fixed mapping threshold (every block above 256 KiB
mapped on its own, returned at once when freed) gave 441-448 MB but made the Summation lab's 10^6
values 20-30% slower (each large array paid its page faults again), so glibc keeps its own. The
arrays are large and few, so one arena's lock costs nothing measurable (the same times within the
spread). Where the C library is not glibc nothing is changed. This decides where freed memory goes,
never what is computed.

**Python's cyclic collector.** Every so often Python's collector walks every object it tracks, holding
the interpreter meanwhile, so every viewer's page waits for it. On the 2-core development VM, through a
warm-up and three crowds of 100 viewers, it came round ten times and took up to 0.19 s, longer as the
process grew; with the warm objects frozen, 8-29 ms. ``freeze_long_lived`` moves the objects alive at
that moment (modules, warm caches) out of the collector's reach (``gc.freeze``), so later passes walk only
what came after. It is called once the server is warm (scripts.serve) and after a process's first script
run (app.py). Objects frozen stay until the process ends even if they later become unreachable cycles; at
those two moments that is the warm-up's few sessions, a bounded one-time cost. Reference counting still
frees everything else.

Importing this module sets each of these unless the environment already chose it; the library
settings have an effect only when this comes before torch's first import in the process (app.py,
scripts.serve and the test suite import it first).
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading

SETTINGS = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64",
    "LRU_CACHE_CAPACITY": "64",
    "NUMBA_DISABLE_INTEL_SVML": "1",
}
for _name, _value in SETTINGS.items():
    os.environ.setdefault(_name, _value)

# mallopt's parameter number, from glibc's malloc.h, with the value described above.
M_ARENA_MAX = -8
MALLOC_SETTINGS = {
    M_ARENA_MAX: ("MALLOC_ARENA_MAX", 1),
}


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "gnu_get_libc_version") else None  # only glibc has it
    except OSError:
        return None


def _tune_malloc() -> dict[str, int]:
    """The allocator settings applied, by their environment names; empty where the C library is not glibc."""
    libc = _glibc()
    if libc is None:
        return {}
    applied = {}
    for param, (env_name, value) in MALLOC_SETTINGS.items():
        if env_name not in os.environ and libc.mallopt(param, value) == 1:
            applied[env_name] = value
    return applied


MALLOC_APPLIED = _tune_malloc()


_LIBC = _glibc()


def release_freed_memory() -> None:
    """Give the memory that freed blocks leave inside glibc's arenas back to the system (malloc_trim).

    Called after each script run: a page's computation frees its arrays when the run ends, and without
    this the pages of the arena they came from stay counted in the server's private memory. Process
    wide, but it moves no live data and changes no result; with another library it does nothing."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def freeze_long_lived() -> int:
    """Collect what is garbage now, then put every object still alive out of the cyclic collector's reach
    (``gc.freeze``: see the module docstring); returns how many objects are frozen in all. Changes no result."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


_FIRST_RUN = threading.Lock()
_first_run_frozen = False


def freeze_after_first_run() -> None:
    """``freeze_long_lived`` once per process, from the first script run that gets here (app.py calls this
    after every run): by then the modules every page needs are loaded."""
    global _first_run_frozen
    with _FIRST_RUN:
        if not _first_run_frozen:
            _first_run_frozen = True
            freeze_long_lived()
