"""core.training.gloo (with gloo_supervisor, gloo_worker and data_parallel): a real gloo process group trains
beside one process, is supervised and torn down cleanly; core.training.emulate: the one-process emulation of k
devices combines gradients in the models' orders.

The live runs start real worker processes (each imports torch), so they are few and short: two
workers for 30 steps, one worker for 3, and three runs that are made to fail.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import core.machines.memory as memory
import core.training.data_parallel as dp
import core.training.emulate as emulate
import core.training.gloo as gloo
import core.training.gloo_supervisor as supervisor
import core.training.gloo_worker as gloo_worker
from core.kernels import collectives
from core.machines.globalstate import GlobalState, torch_threads
from core.training.seeds import summarize
from scripts import data_parallel as cli

LINE = re.compile(r"data-parallel \(gloo, world size \d+\): (first differs from one process at step \d+, (first "
                  r"more than 1% apart at step \d+|never more than 1% apart within \d+ steps)|bit-identical to one "
                  r"process for \d+ steps)")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def assert_no_process_left(pids: tuple[int, ...]) -> None:
    assert pids, "the run reported no worker pids"
    assert all(gone(p) for p in pids), [p for p in pids if not gone(p)]
    with pytest.raises(ProcessLookupError):
        os.killpg(pids[0], 0)  # the workers' process group is empty


def listening_addresses(pid: int) -> list[str]:
    """Local addresses of the TCP sockets a process listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table, v6 in (("tcp", False), ("tcp6", True)):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # state LISTEN, owned by this process
                addr = parts[1].split(":")[0]
                if v6:
                    found.append("::" if set(addr) == {"0"} else addr)
                else:
                    found.append(".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


# ----------------------------------------------------------------------- the live runs


def _two_workers():
    seen: dict = {}
    before = GlobalState.capture()

    def progress(p: supervisor.WorkerProgress) -> None:
        if p.what == "starting" and p.done == p.total and "listen" not in seen:
            seen["listen"] = {pid: listening_addresses(pid) for pid in p.pids}
        seen.setdefault("phases", []).append(p.what)

    r = gloo.run_data_parallel(2, 30, on_progress=progress)
    seen["estimate"] = gloo.worker_memory_estimate()  # right after this run (a later test's run may replace it)
    return r, seen, before, GlobalState.capture()


@pytest.fixture(scope="module")
def two_workers(once_per_run):
    """One real 2-process gloo run of 30 steps, what it reported while it ran, and the global state of the
    process that ran it, before and after."""
    return once_per_run("gloo-data-parallel-2x30", _two_workers)


def test_two_gloo_workers_train_and_are_compared_with_one_process(two_workers):
    r, seen, _, _ = two_workers
    assert [x.step for x in r.records] == list(range(1, 31))
    first = r.records[0]
    assert first.loss_a_bits == first.loss_b_bits  # same weights, same batch before the first update
    assert r.replicas_identical  # every rank applied the same all-reduced gradient
    assert r.threads_per_worker == (1, 1)
    assert r.summary == summarize(r.records)
    assert len(r.digests) == 30
    assert LINE.fullmatch(r.line()), r.line()
    assert seen["phases"][0] == "starting" and "training" in seen["phases"]


def test_workers_listen_on_loopback_only(two_workers):
    _, seen, _, _ = two_workers
    addresses = [a for found in seen["listen"].values() for a in found]
    assert addresses, seen  # rank 0's store and gloo's own listeners
    assert set(addresses) == {"127.0.0.1"}, seen


def test_memory_is_measured_and_within_the_cap(two_workers):
    r, seen, _, _ = two_workers
    assert len(r.worker_max_rss) == 2
    assert all(0 < m <= supervisor.WORKER_MEMORY_CAP for m in r.worker_max_rss), r.worker_max_rss
    assert r.peak_rss_bytes >= max(r.worker_max_rss) * 0.5
    if r.peak_pss_bytes is not None:
        assert 0 < r.peak_pss_bytes <= r.peak_rss_bytes
    per, why = seen["estimate"]  # the next run's estimate, taken right after this run: its own peak, plus a quarter
    assert per >= max(r.worker_max_rss) and "measured" in why


def test_the_server_process_is_left_as_it_was(two_workers):
    """Threads are set in the workers' environment only: this process's global state is unchanged."""
    _, _, before, after = two_workers
    assert before == after


def test_the_ring_model_replays_the_live_run_bit_for_bit(two_workers):
    """Shard gradients computed as a worker computes them (own backward pass, one thread), summed in the
    gloo ring model's order: the same weights as the real process group after every step."""
    r = two_workers[0]
    with torch_threads(1):
        emu = emulate.emulate_run(2, "ring_gloo", len(r.records), per_shard="loop")
    assert dp.first_divergence(r.digests, emu.digests) is None
    assert [x.loss_b_bits for x in emu.records] == [x.loss_b_bits for x in r.records]


def test_no_process_is_left_after_a_run(two_workers):
    assert_no_process_left(two_workers[0].pids)


def test_one_worker_is_bit_identical_to_one_process():
    r = gloo.run_data_parallel(1, 3)
    assert r.summary.first_difference is None
    assert r.line() == "data-parallel (gloo, world size 1): bit-identical to one process for 3 steps"
    assert_no_process_left(r.pids)


def test_a_failing_worker_stops_the_whole_group():
    with pytest.raises(gloo.DataParallelError, match=r"Worker 1 stopped .*injected failure at step 2") as err:
        gloo.run_data_parallel(2, 5, fault={"rank": 1, "step": 2, "kind": "raise"})
    assert_no_process_left(err.value.pids)


def test_a_hanging_worker_times_out_and_is_killed():
    with pytest.raises(gloo.DataParallelError) as err:
        gloo.run_data_parallel(2, 5, step_timeout=4, fault={"rank": 1, "step": 1, "kind": "hang"})
    assert re.search(r"progress|stopped|took longer", str(err.value)), err.value
    assert_no_process_left(err.value.pids)


class Cancelled(Exception):
    pass


def test_cancelling_while_starting_kills_the_workers():
    seen = {}

    def progress(p: supervisor.WorkerProgress) -> None:
        seen["pids"] = p.pids
        raise Cancelled

    with pytest.raises(Cancelled):
        gloo.run_data_parallel(2, 5, on_progress=progress)
    assert_no_process_left(seen["pids"])


def test_workers_that_cannot_start_give_a_clear_message():
    with pytest.raises(gloo.DataParallelError, match="could not be started"):
        gloo.run_data_parallel(2, 3, python="/nonexistent/bin/python3")


def test_a_second_run_waits_or_is_refused():
    assert gloo._RUN_LOCK.acquire(blocking=False)
    try:
        with pytest.raises(gloo.Busy, match="in progress"):
            gloo.run_data_parallel(1, 2, wait=False)
    finally:
        gloo._RUN_LOCK.release()


def test_no_room_means_no_start(monkeypatch):
    # room_for looks memory_room up in core.training.gloo, so that is where it is replaced
    monkeypatch.setattr(gloo, "memory_room", lambda: memory.Room(10 << 20, "a tiny test limit"))
    with pytest.raises(gloo.NoRoom, match=r"Not enough free memory.*a tiny test limit"):
        gloo.run_data_parallel(2, 3)
    ok, why = gloo.room_for(1)
    assert not ok and "MB" in why


@pytest.mark.parametrize(("world", "steps", "message"), [
    (3, 5, "split evenly"), (2, 0, "steps must be"), (16, 5, "at most"), (0, 5, "between 1"),
])
def test_bad_runs_are_refused_with_a_reason(world, steps, message):
    with pytest.raises(gloo.DataParallelError, match=message):
        gloo.run_data_parallel(world, steps)


def test_worker_environment():
    env = supervisor._worker_env()
    assert env["OMP_NUM_THREADS"] == "1" and env["GLOO_SOCKET_IFNAME"]
    assert not {"LOCAL_WORLD_SIZE", "PMI_SIZE", "MASTER_PORT"} & set(env)  # gloo's shared-memory path stays off
    room = memory.memory_room()
    assert room.available_bytes is None or room.available_bytes > 0


def test_the_worker_entry_starts_the_module_that_defines_the_worker():
    assert f"from {gloo_worker._worker_main.__module__} import _worker_main;" in gloo_worker.WORKER_ENTRY
    assert supervisor.WORKER_ENTRY is gloo_worker.WORKER_ENTRY


def test_command_line(capsys):
    assert cli.main(["--world-size", "1", "--steps", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "data-parallel (gloo, world size 1): bit-identical to one process for 2 steps"
    for bad in (["--world-size", "3"], ["--steps", "0"], ["--world-size", "two"]):
        with pytest.raises(SystemExit) as err:
            cli.main(bad)
        assert err.value.code == 2
        assert "Traceback" not in capsys.readouterr().err


# ------------------------------------------------------------------------ the emulation


def test_emulated_devices_combine_shard_gradients_in_the_models_order():
    run = emulate.emulate_run(8, "ring_gloo", 3)
    assert [r.step for r in run.records] == [1, 2, 3] and len(run.digests) == 3
    assert run.records[0].loss_a_bits == run.records[0].loss_b_bits
    # step 1 by hand: shard gradients at the initial weights, times 1/8, ring-summed, one SGD step
    s = dp.DP_SETTINGS
    x, y, schedule = dp._data(s, 1)
    replica = dp._Replica(s)
    g = emulate.shard_gradients(replica.params, x, y, dp.shards(schedule[0], 8)) * np.float32(1 / 8)
    replica.apply(torch.from_numpy(collectives.ring_gloo(g)))
    assert dp.weights_digest(replica.flat()) == run.digests[0]


@pytest.mark.parametrize("sizes", [(128,) * 8, (300, 400, 300), (1,) * 24])
def test_batched_shard_gradients_are_each_shards_own_backward_pass(sizes):
    # shards of unequal sizes are batched by size, so their rows are not consecutive (300, 400, 300)
    s = dp.DP_SETTINGS
    x, y, schedule = dp._data(s, 1)
    replica = dp._Replica(s)
    ends = np.cumsum((0, *sizes))
    parts = [schedule[0][a:b] for a, b in itertools.pairwise(ends)]
    batched = emulate.shard_gradients(replica.params, x, y, parts)
    assert all(p.grad is None for p in replica.params.values())  # the weights' own gradients untouched
    loop = np.stack([replica.local_gradient(x[p], y[p]).numpy() for p in parts])
    assert batched.dtype == np.float32 and batched.shape == loop.shape
    # the same sums in another blocking: within float32 rounding of the largest term, never more
    np.testing.assert_allclose(batched, loop, rtol=0, atol=1e-5 * float(np.abs(loop).max()))


def test_a_thousand_emulated_devices():
    run = emulate.emulate_run(1024, "tree_nccl", 1)
    assert run.records[0].step == 1 and run.summary.first_difference in (None, 1)


def test_first_divergence():
    assert dp.first_divergence(("a", "b", "c"), ("a", "b", "c")) is None
    assert dp.first_divergence(("a", "b", "c"), ("a", "x", "c")) == 2
    assert dp.first_divergence(("a",), ("a", "b")) is None


def test_emulation_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="split evenly"):
        emulate.emulate_run(3, "ring_gloo", 2)
    with pytest.raises(ValueError, match="unknown collective model"):
        emulate.emulate_run(8, "mesh", 2)
    with pytest.raises(ValueError, match="steps must be"):
        emulate.emulate_run(8, "ring_gloo", dp.MAX_EMULATED_STEPS + 1)


def test_rank_gradients_are_shards_of_the_full_batch_gradient():
    s = dp.DP_SETTINGS
    x, y, schedule = dp._data(s, 1)
    full = dp._Replica(s).local_gradient(x[schedule[0]], y[schedule[0]]).numpy()
    for k in (4, 100):  # 100 does not divide 1,024: shards of 11 and 10 examples, as DistributedSampler without padding
        g = emulate.rank_gradients(k)
        assert g.shape == (k, full.size) and g.dtype == np.float32
        if s.batch % k == 0:
            np.testing.assert_allclose(g.astype(np.float64).sum(0), full, rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError, match="ranks"):
        emulate.rank_gradients(s.batch + 1)


def test_order_study_small():
    study = emulate.order_study((2, 5))
    assert [c.ranks for c in study] == [2, 5]
    assert all(p.differing == 0 for p in study[0].pairs)
