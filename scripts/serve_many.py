"""Serve the app from several processes behind one address: N Streamlit processes with HAProxy in front.

    python -m scripts.serve_many --processes 2 --port 8501 [--address 0.0.0.0] [-- streamlit options]
    python -m scripts.serve_many --processes 2 --port 8501 --print-config   # the HAProxy config, nothing started

One Streamlit process serves every viewer, and a page run holds the interpreter, so a room that opens a link
at once is served on about one core. This starts N processes, each ``python -m scripts.serve`` (the app with
its warm-up, as ``make run`` and the Docker image start it) on a free loopback port, and Debian's HAProxy on
the one address viewers open, from deploy/haproxy.cfg: a new viewer goes to the process with the fewest
open connections, and HAProxy's cookie keeps every later request of that browser (the websocket, uploads,
media, a reconnect) on the same process, which holds the session. N is at most the cores this process may
use. SIGTERM, SIGINT or SIGHUP stops HAProxy first, then every server process (SIGTERM, SIGKILL after
15 s); each child is also asked by the kernel to stop should this launcher die without stopping them. A
server process that exits is reported and the others go on serving (HAProxy's health check sends its
viewers to them, each into a new session); the launcher stops when HAProxy or every server process has.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

from scripts.ports import free_port
from scripts.serve import _healthy

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "deploy" / "haproxy.cfg"
COOKIE = "FPSRV"  # the cookie deploy/haproxy.cfg inserts; its value names the process (s1, s2, ...)
STOP_WAIT_S = 15.0  # a server process gets this long to stop on SIGTERM before it is killed
START_WAIT_S = 120.0  # for every process to answer /_stcore/health


def max_processes() -> int:
    """The cores this process may run on: more server processes than that only share them."""
    return len(os.sched_getaffinity(0))


def haproxy_path() -> str | None:
    """Debian installs haproxy in /usr/sbin, which is not on every user's PATH."""
    return shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.access(p, os.X_OK)), None)


def render(bind: str, ports: Sequence[int]) -> str:
    """deploy/haproxy.cfg with HAProxy listening on ``bind`` (address:port) and one server line per port."""
    servers = "\n".join(f"    server s{i} 127.0.0.1:{port} cookie s{i}" for i, port in enumerate(ports, 1))
    return TEMPLATE.read_text().replace("@BIND@", bind).replace("@SERVERS@", servers)


def _bind(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork: a child only calls it
_PR_SET_PDEATHSIG = 1


def _stop_with_launcher(launcher: int):
    """In a child, before it runs: the kernel sends it SIGTERM when the launcher dies, however it dies."""
    def arm() -> None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != launcher:  # the launcher died before the request was in place
            os._exit(1)
    return arm


class Cluster:
    """N server processes on free loopback ports and HAProxy on ``address:port`` in front of them.

    ``script``: run ``streamlit run script`` in each process instead of the app with its warm-up (the tests'
    small apps). ``log_dir``: each child's output goes to a file there instead of this process's own. The
    kernel counts the thread that started a child as its parent: start a cluster in a thread that outlives it.
    """

    def __init__(self, processes: int, port: int | None = None, address: str = "127.0.0.1",
                 script: str | None = None, streamlit_options: Sequence[str] = (),
                 log_dir: pathlib.Path | None = None) -> None:
        if not 1 <= processes <= max_processes():
            raise ValueError(f"--processes must be between 1 and {max_processes()} (the cores here), not {processes}")
        self.haproxy = haproxy_path()
        if self.haproxy is None:
            raise FileNotFoundError("haproxy is not installed (Debian: apt-get install haproxy)")
        self.port = port if port is not None else free_port()
        self.address, self.script, self.options = address, script, list(streamlit_options)
        self.url = f"http://{'127.0.0.1' if address in ('0.0.0.0', '::') else address}:{self.port}"
        self.ports = [free_port() for _ in range(processes)]
        self.names = [f"s{i}" for i in range(1, processes + 1)]  # the cookie's values, in the order of ports
        self.log_dir = log_dir
        self._dir = tempfile.TemporaryDirectory(prefix="serve-many-")
        self.config = pathlib.Path(self._dir.name) / "haproxy.cfg"
        self.backends: list[subprocess.Popen] = []
        self.proxy: subprocess.Popen | None = None
        self._logs: list = []

    def _spawn(self, cmd: list[str], log_name: str) -> subprocess.Popen:
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = (self.log_dir / log_name).open("w")
            self._logs.append(out)
        return subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT if out else None,
                                preexec_fn=_stop_with_launcher(os.getpid()))

    def backend_command(self, port: int) -> list[str]:
        launch = ["-m", "streamlit", "run", self.script] if self.script else ["-m", "scripts.serve"]
        # the same flags as the Docker image and the browser tests' servers, on loopback only: viewers come
        # through HAProxy
        return [sys.executable, *launch, f"--server.port={port}", "--server.address=127.0.0.1",
                "--server.headless=true", *self.options]

    def start(self, cancelled: threading.Event | None = None) -> Cluster:
        """Start every process, then HAProxy once each answers; raises (having stopped them all) if one does not."""
        try:
            self.backends = [self._spawn(self.backend_command(p), f"server-{p}.log") for p in self.ports]
            for port, proc in zip(self.ports, self.backends, strict=True):
                self._wait(f"http://127.0.0.1:{port}", proc, f"the server process on port {port}", cancelled)
            self.config.write_text(render(_bind(self.address, self.port), self.ports))
            self.proxy = self._spawn([self.haproxy, "-db", "-f", str(self.config)], f"haproxy-{self.port}.log")
            self._wait(self.url, self.proxy, f"haproxy on {self.url}", cancelled)
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def _wait(url: str, proc: subprocess.Popen, what: str, cancelled: threading.Event | None) -> None:
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with status {proc.returncode}")
            if cancelled is not None and cancelled.is_set():
                raise KeyboardInterrupt("stopped while starting")
            if _healthy(url, timeout=1.0):
                return
        raise TimeoutError(f"{what} did not answer /_stcore/health within {START_WAIT_S:.0f} s")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in [*([self.proxy] if self.proxy else []), *self.backends]]

    def exited(self) -> list[str]:
        """The children that have exited, as "name (status)"."""
        named = [("haproxy", self.proxy), *zip(self.names, self.backends, strict=True)]
        return [f"{name} ({p.returncode})" for name, p in named if p is not None and p.poll() is not None]

    def warmed_up(self, timeout: float = 600) -> str:
        """Each process's warm-up report (scripts.serve), once every one has its last line; needs ``log_dir``."""
        if self.log_dir is None:
            raise ValueError("warmed_up reads the processes' logs: start the cluster with a log_dir")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for f in self._logs:
                f.flush()
            done = []
            for port in self.ports:
                lines = [ln for ln in (self.log_dir / f"server-{port}.log").read_text().splitlines()
                         if ln.startswith(("warm-up: ", "warm-up stopped"))]
                done += [f"{port}: {ln}" for ln in lines[-1:]]
            if len(done) == len(self.ports):
                return " | ".join(done)
            if bad := self.exited():
                raise RuntimeError(f"exited while warming up: {', '.join(bad)}")
            time.sleep(0.25)
        raise TimeoutError(f"not every process finished its warm-up within {timeout} s")

    def stop(self) -> None:
        """HAProxy first (no new requests reach a process that is stopping), then every server process."""
        children = [*([self.proxy] if self.proxy else []), *self.backends]
        for proc in children:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_WAIT_S
        for proc in children:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in self._logs:
            f.close()
        self._logs = []
        self._dir.cleanup()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Options after -- go to every streamlit process.")
    ap.add_argument("--processes", type=int, default=2, help=f"server processes, 1 to {max_processes()} here")
    ap.add_argument("--port", type=int, default=8501, help="the port viewers open (HAProxy's)")
    ap.add_argument("--address", default="127.0.0.1", help="where HAProxy listens (0.0.0.0: every interface)")
    ap.add_argument("--script", default=None, help="run `streamlit run SCRIPT` in each process instead of the app")
    ap.add_argument("--print-config", action="store_true", help="print the HAProxy config and start nothing")
    args, rest = ap.parse_known_args(argv)
    if rest[:1] not in ([], ["--"]):
        ap.error(f"unrecognized arguments: {' '.join(rest)} (options for streamlit go after --)")
    options = rest[1:]
    if not 1 <= args.processes <= max_processes():
        ap.error(f"--processes must be between 1 and {max_processes()} (the cores here), not {args.processes}")
    if args.print_config:
        ports = [args.port + i for i in range(1, args.processes + 1)]
        print(render(_bind(args.address, args.port), ports), end="")
        flags = " ".join(["--server.port=PORT", "--server.address=127.0.0.1", "--server.headless=true", *options])
        print(f"# the server processes: python -m scripts.serve {flags}, PORT in {', '.join(map(str, ports))}")
        return 0
    if haproxy_path() is None:
        print("serve_many: haproxy is not installed (Debian: apt-get install haproxy)", file=sys.stderr)
        return 2

    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopping.set())
    cluster = Cluster(args.processes, args.port, args.address, args.script, options)
    try:
        cluster.start(stopping)
    except (KeyboardInterrupt, RuntimeError, TimeoutError) as err:
        print(f"serve_many: not started: {err}", file=sys.stderr)
        return 1
    for name, port, proc in zip(cluster.names, cluster.ports, cluster.backends, strict=True):
        print(f"serve_many: {name} on 127.0.0.1:{port} (pid {proc.pid})", flush=True)
    print(f"serve_many: {args.processes} processes behind {cluster.url} (haproxy pid {cluster.proxy.pid})",
          flush=True)
    status, told = 0, set()
    while not stopping.wait(0.5):
        gone = cluster.exited()
        if any(g.startswith("haproxy ") for g in gone) or len(gone) == len(cluster.backends):
            print(f"serve_many: {', '.join(gone)} exited; stopping the rest", file=sys.stderr, flush=True)
            status = 1
            break
        for g in sorted(set(gone) - told):  # HAProxy's health check sends its viewers to the others
            print(f"serve_many: {g} exited; the other processes go on serving", file=sys.stderr, flush=True)
            told.add(g)
    cluster.stop()
    print("serve_many: stopped", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
