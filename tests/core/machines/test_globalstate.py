"""core.machines.globalstate: settings changes are exclusive and always restored."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import threading
import time

import pytest
import torch

from core.machines.globalstate import (
    GLOBAL_SETTINGS_LOCK,
    PROCESS_THREADS,
    GlobalState,
    current_settings,
    deterministic_algorithms,
    new_thread_threads,
    torch_threads,
)


def test_torch_threads_restores_even_on_error():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), torch_threads(0):
        pass


def test_concurrent_users_each_see_their_own_thread_count():
    before = GlobalState.capture()
    seen: dict[str, list[int]] = {"one": [], "two": []}
    errors = []

    def worker(name: str, n: int):
        try:
            for _ in range(20):
                with torch_threads(n):
                    time.sleep(0.001)  # give the other thread every chance to interfere
                    seen[name].append(torch.get_num_threads())
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=("one", 1)), threading.Thread(target=worker, args=("two", 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert set(seen["one"]) == {1} and set(seen["two"]) == {2}
    assert GlobalState.capture() == before


def test_lock_is_reentrant():
    with GLOBAL_SETTINGS_LOCK, torch_threads(1), torch_threads(1):
        assert torch.get_num_threads() == 1


# ----------------------------------------------------------------- no leaked thread count
# Under OpenMP torch's thread count is per OS thread, and a thread takes the process default (the
# last torch.set_num_threads anywhere) at its first use of torch. STALE is a count other than the
# configured one, so these tests mean something on a one-core machine too.
STALE = 1 if PROCESS_THREADS != 1 else 2


def _in_fresh_thread(fn):
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_a_stale_script_thread_cannot_write_its_count_back_as_the_process_default():
    """A script thread whose first use of torch came while another viewer held a STALE block starts with
    that count; its own block must not write it back as the count every new thread gets."""
    held, release = threading.Event(), threading.Event()

    def other_viewer():
        with torch_threads(STALE):
            held.set()
            release.wait(10)

    def script_thread():
        held.wait(10)
        first = torch.get_num_threads()  # first use of torch in this thread: copies STALE
        release.set()
        with torch_threads(PROCESS_THREADS):
            inside = torch.get_num_threads()
        return first, inside

    viewer = threading.Thread(target=other_viewer)
    viewer.start()
    first, inside = _in_fresh_thread(script_thread)
    viewer.join()
    assert first == STALE  # the precondition: this thread really started stale
    assert inside == PROCESS_THREADS
    assert _in_fresh_thread(torch.get_num_threads) == PROCESS_THREADS
    assert new_thread_threads() == PROCESS_THREADS
    assert current_settings()[0] == PROCESS_THREADS


def test_a_thread_whose_own_count_was_set_directly_cannot_leak_it():
    """The same failure, simulated directly: torch.set_num_threads(STALE) in a fresh thread, then a block."""

    def stale_then_block():
        with GLOBAL_SETTINGS_LOCK:  # the simulation itself changes the process default: locked, restored below
            torch.set_num_threads(STALE)
            try:
                with torch_threads(PROCESS_THREADS + 1):
                    inside = torch.get_num_threads()
            finally:
                after = torch.get_num_threads()
                torch.set_num_threads(PROCESS_THREADS)
        return inside, after

    inside, after = _in_fresh_thread(stale_then_block)
    assert inside == PROCESS_THREADS + 1
    assert after == PROCESS_THREADS  # torch_threads restored the configured count, not the stale one
    assert new_thread_threads() == PROCESS_THREADS


def test_nested_blocks_restore_the_enclosing_request():
    with torch_threads(STALE):
        with torch_threads(PROCESS_THREADS + 1):
            assert torch.get_num_threads() == PROCESS_THREADS + 1
        assert torch.get_num_threads() == STALE
        assert _in_fresh_thread(torch.get_num_threads) == STALE  # inside the block, by design
    assert torch.get_num_threads() == PROCESS_THREADS
    assert new_thread_threads() == PROCESS_THREADS


def test_many_threads_racing_never_leak_a_thread_count():
    """16 threads race through 1 / configured / configured + 1 thread blocks. Half of them make their
    first use of torch while another viewer holds a STALE block, so they start with a stale count of
    their own (the precondition of the test above, made certain). Between blocks, probes take the lock
    (so no block is open) and read what a fresh thread gets: it must always be the configured count."""
    workers, rounds = 16, 40
    stale_starts: list[int] = []
    wrong_inside: list[tuple[int, int]] = []
    probes: list[int] = []
    errors: list[BaseException] = []
    stale_group = threading.Barrier(workers // 2 + 1)
    released = threading.Event()

    def worker(i: int):
        try:
            if i % 2 == 0:
                stale_group.wait(10)  # the holder below is inside torch_threads(STALE) now
                if torch.get_num_threads() == STALE:  # first use of torch in this thread
                    stale_starts.append(i)
                stale_group.wait(10)
            released.wait(10)
            for r in range(rounds):
                want = (1, PROCESS_THREADS, PROCESS_THREADS + 1)[(i + r) % 3]
                with torch_threads(want):
                    got = torch.get_num_threads()
                    if got != want:
                        wrong_inside.append((want, got))
                if r % 4 == 0:  # outside every block: what would a new session's thread get?
                    with GLOBAL_SETTINGS_LOCK:
                        probes.append(new_thread_threads())
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    with torch_threads(STALE):  # another viewer's block while half the workers start
        stale_group.wait(10)
        stale_group.wait(10)
    released.set()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(stale_starts) == workers // 2  # the failure's precondition really held
    assert not wrong_inside, wrong_inside[:5]
    assert probes == [PROCESS_THREADS] * len(probes), sorted(set(probes))
    after = [_in_fresh_thread(torch.get_num_threads) for _ in range(8)]
    assert after == [PROCESS_THREADS] * 8
    assert torch.get_num_threads() == PROCESS_THREADS
    assert current_settings()[0] == PROCESS_THREADS


def test_deterministic_mode_is_set_inside_the_block_and_restored_after():
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    with deterministic_algorithms(True):
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        with deterministic_algorithms(False):
            assert not torch.are_deterministic_algorithms_enabled()
        assert torch.are_deterministic_algorithms_enabled()
    assert (torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled()) == before


def test_deterministic_mode_reaches_the_compilers_setting_once_the_compiler_is_loaded():
    import torch._inductor.config as inductor_config

    before = inductor_config.deterministic
    with deterministic_algorithms(True):
        assert inductor_config.deterministic is True
    assert inductor_config.deterministic == before == torch.are_deterministic_algorithms_enabled()


def test_deterministic_mode_does_not_load_the_compiler():
    """torch.use_deterministic_algorithms imports TorchDynamo and SymPy; a server that never compiles
    must not pay for them (see _set_deterministic)."""
    code = ("import sys, torch\n"
            "from core.machines.globalstate import deterministic_algorithms\n"
            "with deterministic_algorithms(True):\n"
            "    torch.zeros(4).index_add_(0, torch.tensor([0, 0]), torch.ones(2))\n"
            "print(sorted(m for m in ('torch._inductor', 'torch._dynamo', 'sympy') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=pathlib.Path(__file__).resolve().parents[3]).stdout
    assert out.strip() == "[]"
