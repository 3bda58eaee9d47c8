"""Process-global numeric settings, read and (rarely) changed safely.

Streamlit serves every viewer from threads of one process, so torch's thread count,
deterministic mode, the global RNG and mpmath's precision are shared by all of them.
Pages never set them directly.  When a computation truly needs a different setting (a
sum with one CPU thread, say), it runs inside ``torch_threads``, which holds a
process-wide lock for the whole computation and restores the previous value after it,
so no other viewer's computation can observe the change.

torch's intra-op thread count needs care. Under OpenMP, ``torch.get_num_threads()`` is
per OS thread, and a thread takes the process default (the value of the last
``torch.set_num_threads`` anywhere) when it first uses torch. A script thread that started
during another viewer's one-thread block therefore reads 1 for itself; restoring "whatever
was read" would write that 1 back as the process default for every later thread. So
``torch_threads`` restores the process's configured count (``PROCESS_THREADS``, read once
at import), never a value read from the calling thread, and readers report that count.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import mpmath
import numpy as np
import torch

GLOBAL_SETTINGS_LOCK = threading.RLock()
# The process's own intra-op thread count, read once at import, before any viewer's
# computation can change it temporarily: "all threads" always means this many.
PROCESS_THREADS = max(1, torch.get_num_threads())


# The counts requested by the ``torch_threads`` blocks now open, innermost last. Only the
# thread holding GLOBAL_SETTINGS_LOCK (re-entrantly) ever touches it.
_requested: list[int] = []


def current_settings() -> tuple[int, bool]:
    """(the process's configured torch threads, deterministic mode), read under the lock.

    The thread count is the configured one, not ``torch.get_num_threads()`` of the calling
    thread, which may be a stale per-thread value (see the module docstring).
    """
    with GLOBAL_SETTINGS_LOCK:
        return PROCESS_THREADS, torch.are_deterministic_algorithms_enabled()


def new_thread_threads() -> int:
    """The thread count a thread started now gets from torch (the process default)."""
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(torch.get_num_threads()), name="thread-count-probe")
    reader.start()
    reader.join()
    return seen[0]


@dataclass(frozen=True, kw_only=True)
class GlobalState:
    torch_threads: int
    torch_threads_new_thread: int  # the process default a fresh thread starts with
    torch_deterministic: bool
    torch_rng_digest: str
    numpy_rng_digest: str
    mpmath_prec: int
    default_dtype: torch.dtype

    @staticmethod
    def capture() -> GlobalState:
        torch_rng = hashlib.sha256(torch.random.get_rng_state().numpy().tobytes()).hexdigest()
        np_state = np.random.get_state(legacy=False)
        np_rng = hashlib.sha256(repr(np_state).encode()).hexdigest()
        return GlobalState(
            torch_threads=torch.get_num_threads(),
            torch_threads_new_thread=new_thread_threads(),
            torch_deterministic=torch.are_deterministic_algorithms_enabled(),
            torch_rng_digest=torch_rng,
            numpy_rng_digest=np_rng,
            mpmath_prec=mpmath.mp.prec,
            default_dtype=torch.get_default_dtype(),
        )


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` torch intra-op threads, exclusively, then restore.

    On exit the count goes back to the enclosing block's request, or to ``PROCESS_THREADS``
    outside every block: never to a value read from this OS thread, which may be stale.
    """
    if n < 1:
        raise ValueError("thread count must be at least 1")
    with GLOBAL_SETTINGS_LOCK:
        _requested.append(n)
        try:
            torch.set_num_threads(n)
            yield
        finally:
            _requested.pop()
            torch.set_num_threads(_requested[-1] if _requested else PROCESS_THREADS)


@contextmanager
def cuda_tf32(enabled: bool) -> Iterator[None]:
    """Run a block with TF32 matmuls on or off (CUDA only), exclusively, then restore."""
    with GLOBAL_SETTINGS_LOCK:
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = enabled
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous


@contextmanager
def deterministic_algorithms(enabled: bool) -> Iterator[None]:
    """Run a block with torch's deterministic mode on or off, exclusively, then restore.

    ``warn_only=True``: another viewer's operation that has no deterministic kernel (on a GPU) warns
    instead of raising while the block runs."""
    with GLOBAL_SETTINGS_LOCK:
        previous = (torch.are_deterministic_algorithms_enabled(),
                    torch.is_deterministic_algorithms_warn_only_enabled())
        _set_deterministic(enabled, warn_only=True)
        try:
            yield
        finally:
            _set_deterministic(*previous)


def _set_deterministic(enabled: bool, warn_only: bool) -> None:
    """What ``torch.use_deterministic_algorithms`` does, without importing the compiler.

    torch's function imports ``torch._inductor.config`` to copy the mode into the compiler's settings, and
    with it TorchDynamo and SymPy: 66 MB of private memory per server process, measured on the 2-core
    development VM (torch 2.13), for a setting that only compiled code reads. The app compiles nothing, so
    the mode goes to torch's own flag, and to the compiler's setting too once something else has loaded it.
    """
    torch._C._set_deterministic_algorithms(enabled, warn_only=warn_only)
    inductor_config = sys.modules.get("torch._inductor.config")
    if inductor_config is not None:
        inductor_config.deterministic = enabled
