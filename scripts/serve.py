"""Serve the app, warmed up: ``streamlit run app.py`` with a warm-up that starts with the server.

    python -m scripts.serve [streamlit options]   # what `make run` and the Docker image run

Streamlit runs none of an app's code until a first visitor opens a page, so on a fresh server that
visitor waits for the imports (torch, pandas, altair: seconds) and for whatever the page computes
first. Here the server starts at once, as ``streamlit run`` would, and a thread of its own imports
the modules every page needs and trains the Mitigations page's two pairs
(core.studies.mitigations.warm_up) into the process's shared results cache. A visitor who arrives
meanwhile is served as usual; one who needs a result being computed waits for that one computation,
never for a second one. Community Cloud runs ``streamlit run`` on its own entry point, so there the
first visitor still pays for the imports.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time

import core.machines.native  # noqa: F401  (before anything loads torch: OpenMP and oneDNN read their settings then)

# What the home page and the Mitigations page import on their first run (the heaviest first).
MODULES = ("torch", "pandas", "altair", "core.arith.exact", "core.studies.mitigations", "core.training.seeds",
           "core.recordings.store", "ui.navigation", "ui.overview_view", "ui.talk", "ui.mitigations_view")


def warm_up(report=lambda line: print(line, file=sys.stderr, flush=True)) -> dict[str, float]:
    """Import MODULES, then train the Mitigations pairs; seconds of each part, reported in one line."""
    t0 = time.monotonic()
    for name in MODULES:
        importlib.import_module(name)
    t1 = time.monotonic()
    from core.studies.mitigations import warm_up as train_pairs

    train_pairs()
    took = {"imports_s": t1 - t0, "pairs_s": time.monotonic() - t1}
    report(f"warm-up done: imports {took['imports_s']:.1f} s, the Mitigations training pairs {took['pairs_s']:.1f} s")
    return took


def _warm_up_quietly() -> None:
    try:
        warm_up()
    except Exception as err:  # a page computes what the warm-up could not; the server must not fall over
        print(f"warm-up stopped: {type(err).__name__}: {err}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    threading.Thread(target=_warm_up_quietly, name="warm-up", daemon=True).start()
    sys.argv = ["streamlit", "run", "app.py", *(sys.argv[1:] if argv is None else argv)]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
