"""Suite-wide settings: hypothesis profiles, the browser marker, and an order for pytest-xdist.

`make test` runs one pytest-xdist worker per core with `--dist loadgroup --no-loadscope-reorder`:
every test is a unit of its own, handed to whichever worker runs low, in collection order (no test
carries an xdist_group mark; with pytest 9, xdist 3.8 would ignore one anyway, since it renames
tests through a node attribute that pytest 9 no longer reads). Each worker starts its own Streamlit
server for the tests that share one (the session-scoped `server` fixture) and its own Chromium;
every viewer still gets a browser context of its own. The longest tests go first, so the short
core tests fill in around them instead of a long one starting last.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable

import pytest
from filelock import FileLock
from hypothesis import HealthCheck, settings

import core.machines.native  # noqa: F401  (before torch: the app's native-library settings, for every worker and server)

# Per-example deadlines measure the machine's load, not the code: on a busy 2-core machine (two
# workers, a browser and a server) an example that takes 20 ms alone can take 400 ms. The example
# counts stay as each test sets them.
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Modules whose tests hold the machine for a minute or more (a crowd of browsers, the whole talk,
# memory at the largest inputs, many plays of the training page): they start first, so nothing long
# is left for the end of the run.
LONGEST = (
    "tests/e2e/test_crowd.py",
    "tests/test_hosting.py",
    "tests/e2e/test_talk.py",
    "tests/e2e/test_training_browser.py",
    "tests/e2e/test_browser.py",
    "tests/e2e/test_offline_browser.py",
    "tests/e2e/test_first_screen.py",
)


def _path(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _rank(item: pytest.Item) -> tuple[int, int]:
    path = _path(item)
    if path in LONGEST:
        return 0, LONGEST.index(path)
    if path.startswith("tests/e2e/") or item.get_closest_marker("browser"):
        return 1, 0
    if path.startswith("tests/pages/") or path.startswith("tests/test_"):
        return 2, 0
    return 3, 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = _path(item)
        if path.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.browser)  # every test there drives a real server and Chromium
    items.sort(key=_rank)  # stable: within a rank, the collection order


@pytest.fixture(scope="session")
def once_per_run(tmp_path_factory, worker_id) -> Callable:
    """``once_per_run(name, compute)``: compute()'s result, computed by one xdist worker and read back by
    the others (a pickle in the run's shared temporary folder, behind a file lock).

    For expensive results that several tests only read but that land on different workers (a module
    fixture runs once per worker): real multi-process gloo runs take 10-20 s each on 2 cores. Each run
    of the suite has a new folder, so nothing is reused from an earlier run.
    """
    if worker_id == "master":  # no xdist: a module or session fixture already computes it once
        return lambda name, compute: compute()
    root = tmp_path_factory.getbasetemp().parent

    def get(name: str, compute: Callable):
        path = root / f"{name}.pickle"
        with FileLock(str(path) + ".lock"):
            if path.exists():
                return pickle.loads(path.read_bytes())
            value = compute()
            path.write_bytes(pickle.dumps(value))
            return value
    return get
