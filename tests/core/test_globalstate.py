"""core.globalstate: settings changes are exclusive and always restored."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from core.globalstate import GLOBAL_SETTINGS_LOCK, GlobalState, torch_threads


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
