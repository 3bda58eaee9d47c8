"""The room opens the link: N viewers arrive within a few seconds, and the speaker clicks meanwhile.

Starts the app as ``make run`` and the Docker image do (``python -m scripts.serve``, warmed up at start),
and a bare Streamlit page beside it (benchmarks/bare_app.py: a title, a paragraph, one Altair chart). For
the bare page and then for each talk link (``core.studies.talk.scenarios()``, in presenter mode), N protocol-level
viewers (scripts/viewer.py: the websocket messages a browser tab sends and reads) arrive at seeded
random moments within SPREAD_S seconds; one second in, the speaker's session, open since before the
crowd, clicks to the next scenario's page. Each viewer's time is from its request to the end of the run
that drew its page. Viewers stay connected until all have their page, so the server's private memory is
then that of N idle sessions.

Reported per link: p50 and p95 of the viewers' times, p95 as a multiple of the bare page's under the same
crowd, the speaker's click, how many viewers that waited over 2 s were shown a notice while they waited,
errors, and the server's peak private memory (benchmarks.harness.Server.private_mb).

With ``--processes K`` the app runs as K server processes behind HAProxy (scripts/serve_many.py, each
process warmed up as ``scripts.serve`` does), its viewers and the speaker load the page over HTTP first and
keep HAProxy's cookie for their websocket, as a browser does, and its memory is the sum of the processes'.
The bare page stays one process: the peer is the same either way.

Usage: python -m benchmarks.bench_audience [N] [scenario title ...] [--processes K]
(default: 100 viewers, every link, one process)
Last line: audience: N viewers, p95 X s (R x a bare page), speaker's click Y s, peak private M MB
(the worst link's p95 and ratio, the slowest click, the largest peak)
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
from dataclasses import dataclass
from urllib.parse import urlencode

from benchmarks.harness import ROOT, MemoryWatch, Server
from scripts.viewer import Speaker, Visit, view

SPREAD_S = 3.0  # the room opens the link within this many seconds
CLICK_AT_S = 1.0  # when the speaker clicks, after the first viewer arrives
SLOW_S = 2.0  # a wait longer than this should be told on the page


@dataclass(kw_only=True)
class CrowdResult:
    title: str
    times: list[float]
    click_s: float
    told: int  # viewers that waited over SLOW_S and were shown a notice meanwhile
    slow: int  # viewers that waited over SLOW_S
    errors: list[str]
    peak_mb: float
    idle_mb: float  # private memory with every viewer's session open and idle

    @property
    def p95(self) -> float:
        return statistics.quantiles(self.times, n=20)[-1] if len(self.times) > 1 else self.times[0]

    @property
    def p50(self) -> float:
        return statistics.median(self.times)


class _Process:
    """One process of a cluster, its memory read by harness.Server's own /proc reader."""

    _status_mb = Server._status_mb
    private_mb = Server.private_mb

    def __init__(self, proc) -> None:
        self.proc = proc


class Many:
    """The app as K processes behind HAProxy (scripts.serve_many.Cluster), measured as one server: its address,
    the sum of its processes' private memory, and every process's warm-up."""

    sticky = True  # a viewer keeps HAProxy's cookie between its page load and its websocket

    def __init__(self, processes: int) -> None:
        from scripts.serve_many import Cluster

        self.cluster = Cluster(processes, log_dir=ROOT / "artifacts" / "serve-many").start()
        self.url = self.cluster.url
        self._processes = [_Process(p) for p in self.cluster.backends]

    def private_mb(self) -> float:
        return sum(p.private_mb() for p in self._processes)

    def warmed_up(self) -> str:
        return self.cluster.warmed_up()

    def stop(self) -> None:
        self.cluster.stop()


def links() -> list[tuple[str, str, str]]:
    """(title, page url path, query) of the home page and each talk link, in presenter mode (the address a
    speaker shows the room is often the home page's)."""
    from core.studies.talk import scenarios

    return [("Home", "", "talk=1"), *((title, page.removeprefix("pages/").removesuffix(".py"),
                                      urlencode({**params, "talk": "1"})) for title, page, params, _ in scenarios())]


async def _crowd(server: Server | Many, title: str, page: str, query: str, n: int, click: tuple[str, str],
                 seed: int = 0) -> CrowdResult:
    rng = random.Random(seed)
    arrivals = sorted(rng.uniform(0, SPREAD_S) for _ in range(n))
    release = asyncio.Event()
    done: list[Visit] = []
    sticky = getattr(server, "sticky", False)

    async def one(delay: float) -> None:
        await asyncio.sleep(delay)
        await view(server.url, page, query, timeout=300, hold=release, arrived=done.append, sticky=sticky)

    with MemoryWatch(server) as mem:
        async with Speaker(server.url, sticky=sticky) as speaker:
            await speaker.click(page, query)  # the speaker's tab shows the link before the room opens it
            tasks = [asyncio.create_task(one(d)) for d in arrivals]
            await asyncio.sleep(CLICK_AT_S)
            clicked = await speaker.click(*click, timeout=300)
            while len(done) < n:
                await asyncio.sleep(0.05)
            idle_mb = server.private_mb()
            release.set()
            await asyncio.gather(*tasks)
    errors = [v.error for v in done if v.error] + ([f"speaker: {clicked.error}"] if clicked.error else [])
    slow = [v for v in done if v.seconds > SLOW_S]
    return CrowdResult(title=title, times=[v.seconds for v in done], click_s=clicked.seconds,
                       told=sum(bool(v.waits) for v in slow), slow=len(slow), errors=errors, peak_mb=mem.peak_mb,
                       idle_mb=idle_mb)


def crowd(server: Server | Many, title: str, page: str, query: str, n: int, click: tuple[str, str]) -> CrowdResult:
    return asyncio.run(_crowd(server, title, page, query, n, click))


def line(r: CrowdResult, bare: CrowdResult | None) -> str:
    ratio = f" ({r.p95 / bare.p95:.1f}x bare)" if bare is not None else ""
    told = f", told of the wait {r.told}/{r.slow}" if r.slow else ""
    errors = f", ERRORS {len(r.errors)}: {r.errors[:2]}" if r.errors else ""
    return (f"{r.title}: p50 {r.p50:.2f} s, p95 {r.p95:.2f} s{ratio}, speaker's click {r.click_s:.2f} s{told}, "
            f"peak private {r.peak_mb:.0f} MB, idle sessions {r.idle_mb:.0f} MB{errors}")


def main(n: int = 100, titles: list[str] | None = None, processes: int = 1) -> list[CrowdResult]:
    chosen = [link for link in links() if not titles or link[0] in titles]
    bare_server = Server("benchmarks/bare_app.py")
    try:
        crowd(bare_server, "warm-up", "", "", 2, ("", ""))
        bare = crowd(bare_server, "bare page", "", "", n, ("", ""))
    finally:
        bare_server.stop()
    print(line(bare, None), flush=True)
    app = Server(warmed=True) if processes == 1 else Many(processes)
    results = []
    try:
        print(app.warmed_up(), flush=True)
        everything = links()
        for title, page, query in chosen:
            after = everything[(everything.index((title, page, query)) + 1) % len(everything)]
            r = crowd(app, title, page, query, n, (after[1], after[2]))
            results.append(r)
            print(line(r, bare), flush=True)
    finally:
        app.stop()
    worst = max(results, key=lambda r: r.p95 / bare.p95)
    if processes > 1:
        print(f"the app: {processes} server processes behind HAProxy (scripts/serve_many.py)", flush=True)
    print(f"audience: {n} viewers, p95 {worst.p95:.2f} s ({worst.p95 / bare.p95:.1f} x a bare page), speaker's click "
          f"{max(r.click_s for r in results):.2f} s, peak private {max(r.peak_mb for r in results):.0f} MB")
    return results


if __name__ == "__main__":
    args = sys.argv[1:]
    k = 1
    if "--processes" in args:
        at = args.index("--processes")
        k = int(args[at + 1])
        del args[at:at + 2]
    count = int(args.pop(0)) if args and args[0].isdigit() else 100
    main(count, args or None, k)
