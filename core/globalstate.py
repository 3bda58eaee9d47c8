"""Process-global numeric settings, read and (rarely) changed safely.

Streamlit serves every viewer from threads of one process, so torch's thread count,
deterministic mode, the global RNG and mpmath's precision are shared by all of them.
Pages never set them directly.  When a computation truly needs a different setting (a
sum with one CPU thread, say), it runs inside ``torch_threads``, which holds a
process-wide lock for the whole computation and restores the previous value after it,
so no other viewer's computation can observe the change.
"""

from __future__ import annotations

import hashlib
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


def current_settings() -> tuple[int, bool]:
    """(torch threads, deterministic mode) read under the lock, never mid-change."""
    with GLOBAL_SETTINGS_LOCK:
        return torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()


@dataclass(frozen=True)
class GlobalState:
    torch_threads: int
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
            torch_deterministic=torch.are_deterministic_algorithms_enabled(),
            torch_rng_digest=torch_rng,
            numpy_rng_digest=np_rng,
            mpmath_prec=mpmath.mp.prec,
            default_dtype=torch.get_default_dtype(),
        )


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` torch intra-op threads, exclusively, then restore."""
    if n < 1:
        raise ValueError("thread count must be at least 1")
    with GLOBAL_SETTINGS_LOCK:
        previous = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


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
