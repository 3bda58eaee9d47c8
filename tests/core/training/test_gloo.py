"""core.training.gloo's launch settings: the public entry points hand their timeouts, Python and fault on to
the supervisor (core.training.gloo_supervisor) as one Launch, and the supervisor derives the run's deadline
from it. No process is started: the supervisor (or the process group) is replaced by one that records what
it was given."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

import core.training.gloo as gloo
import core.training.gloo_supervisor as supervisor


class Stop(Exception):
    pass


def test_a_launch_defaults_to_the_module_timeouts_and_this_python():
    launch = gloo.Launch()
    assert (launch.startup_timeout, launch.step_timeout, launch.timeout) == (gloo.STARTUP_TIMEOUT, gloo.STEP_TIMEOUT,
                                                                             None)
    assert launch.python == sys.executable and launch.fault is None
    with pytest.raises(TypeError):
        gloo.Launch(1.0)  # keywords only


def test_run_data_parallel_hands_its_keywords_on_as_one_launch(monkeypatch):
    seen = {}

    def supervise(world, mode, extra, *, total, on_progress, launch):
        seen.update(world=world, mode=mode, total=total, launch=launch)
        raise Stop

    monkeypatch.setattr(gloo, "supervise", supervise)  # where run_data_parallel and gloo_allreduce look it up
    fault = {"rank": 1, "step": 2, "kind": "raise"}
    with pytest.raises(Stop):
        gloo.run_data_parallel(2, 4, check_room=False, startup_timeout=7.0, step_timeout=3.0, timeout=50.0,
                               python="/some/python", fault=fault)
    assert (seen["world"], seen["mode"], seen["total"]) == (2, "train", 4)
    assert seen["launch"] == gloo.Launch(startup_timeout=7.0, step_timeout=3.0, timeout=50.0, python="/some/python",
                                         fault=fault)
    assert not gloo._RUN_LOCK.locked()  # released though the run failed


def test_gloo_allreduce_launches_without_a_run_timeout_or_fault(monkeypatch):
    seen = {}

    def supervise(world, mode, extra, *, total, on_progress, launch):
        seen.update(world=world, mode=mode, total=total, launch=launch)
        raise Stop

    monkeypatch.setattr(gloo, "supervise", supervise)  # where run_data_parallel and gloo_allreduce look it up
    with pytest.raises(Stop):
        gloo.gloo_allreduce(np.ones((3, 4)), startup_timeout=9.0, step_timeout=2.0, python="/other/python")
    assert (seen["world"], seen["mode"], seen["total"]) == (3, "probe", 1)
    assert seen["launch"] == gloo.Launch(startup_timeout=9.0, step_timeout=2.0, python="/other/python")


@pytest.mark.parametrize(("timeout", "deadline"), [(None, 10.0 + 4.0 + 2.0 * 5), (33.0, 33.0)])
def test_the_run_deadline_comes_from_the_launch(monkeypatch, timeout, deadline):
    """Without a timeout of its own a run may take both timeouts plus 2 s a step; the workers' own
    deadline is 30 s later, and each operation waits at most the step timeout."""
    seen = {}

    def group(world, cfgs, listen, python, env, errdir):
        seen.update(cfgs=cfgs, python=python)
        raise Stop

    monkeypatch.setattr(supervisor, "_check_backend", lambda: None)
    monkeypatch.setattr(supervisor, "_Group", group)
    launch = gloo.Launch(startup_timeout=10.0, step_timeout=4.0, timeout=timeout, python="/p", fault={"rank": 0})
    before = time.time()
    with pytest.raises(Stop):
        supervisor.supervise(2, "train", {"steps": 5}, total=5, on_progress=None, launch=launch)
    after = time.time()
    assert seen["python"] == "/p" and len(seen["cfgs"]) == 2
    for cfg in seen["cfgs"]:
        assert before + deadline + 30.0 <= cfg["deadline"] <= after + deadline + 30.0
        assert cfg["op_timeout"] == 4.0 and cfg["fault"] == {"rank": 0} and cfg["steps"] == 5
