"""Serve the app, warmed up: ``streamlit run app.py`` with a warm-up that starts with the server.

    python -m scripts.serve [streamlit options]   # what `make run` and the Docker image run

Streamlit runs none of an app's code until a first visitor opens a page, so on a fresh server that
visitor waits for the imports (torch, pandas, altair: seconds) and for whatever the page computes
first. Here the server starts at once, as ``streamlit run`` would, and a thread of its own imports
the modules every page needs, trains the Mitigations page's two pairs
(core.studies.mitigations.warm_up) into the process's shared results cache, then opens the home page
and every talk link (core.studies.talk.scenarios, in presenter mode and without it) as a viewer would, over
Streamlit's own websocket protocol (scripts/viewer.py): every cache those pages fill, wherever it is
declared, is filled before a room opens the links, and a speaker's first click finds its page warm.
A visitor who arrives meanwhile is served as usual; one who needs a result being computed waits for
that one computation, never for a second one. Community Cloud runs ``streamlit run`` on its own entry
point, so there the first visitor still pays for the imports.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
import time
import urllib.request
from urllib.parse import urlencode

import core.machines.native  # before anything loads torch: OpenMP and oneDNN read their settings then

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


def talk_links() -> list[tuple[str, str]]:
    """(page url path, query) of the home page and every talk link, in presenter mode and without it."""
    from core.studies.talk import scenarios

    links = [("", ""), ("", "talk=1")]
    for _, page, params, _ in scenarios():
        stem = page.removeprefix("pages/").removesuffix(".py")
        links += [(stem, urlencode(params)), (stem, urlencode({**params, "talk": "1"}))]
    return links


def _healthy(url: str, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().decode().strip() == "ok":
                    return True
        except OSError:
            pass
        time.sleep(0.25)
    return False


def visit_talk_links(url: str, report=lambda line: print(line, file=sys.stderr, flush=True)) -> float:
    """Open every talk link once, one after another, as a viewer; seconds it took, reported in one line."""
    from scripts.viewer import view

    t0 = time.monotonic()
    if not _healthy(url):
        report(f"warm-up: {url} never answered, the talk links were not visited")
        return 0.0

    async def visit_all() -> list[str]:
        failed = []
        for page, query in talk_links():
            v = await view(url, page, query, timeout=300)
            if v.error:
                failed.append(f"/{page}?{query}: {v.error}")
        return failed

    failed = asyncio.run(visit_all())
    took = time.monotonic() - t0
    report(f"warm-up: {len(talk_links())} talk links visited in {took:.1f} s"
           + (f"; failed: {'; '.join(failed)}" if failed else ""))
    return took


def _port(argv: list[str]) -> int:
    for i, arg in enumerate(argv):
        if arg.startswith("--server.port="):
            return int(arg.split("=", 1)[1])
        if arg == "--server.port" and i + 1 < len(argv):
            return int(argv[i + 1])
    return 8501


def _warm_up_quietly(port: int | None = None) -> None:
    """The warm-up, the talk links' visit, then core.machines.native.freeze_long_lived: what the warm-up
    loaded stays out of the collector's passes. Its last line says it is done."""
    try:
        warm_up()
        visited = []  # its line is held back: the last line a warm-up writes says it is done
        if port is not None:
            visit_talk_links(f"http://127.0.0.1:{port}", report=visited.append)
        frozen = f"{core.machines.native.freeze_long_lived():,} objects kept out of the collector's passes"
        print(f"{visited[0]}; {frozen}" if visited else f"warm-up: {frozen}", file=sys.stderr, flush=True)
    except Exception as err:  # a page computes what the warm-up could not; the server must not fall over
        print(f"warm-up stopped: {type(err).__name__}: {err}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    options = sys.argv[1:] if argv is None else argv
    threading.Thread(target=_warm_up_quietly, args=(_port(options),), name="warm-up", daemon=True).start()
    sys.argv = ["streamlit", "run", "app.py", *options]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
