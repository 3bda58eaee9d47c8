"""A free TCP port on the loopback interface, for a server this process is about to start.

scripts/serve_many.py starts its server processes on such ports, and so do the benchmarks' and the
browser tests' servers (benchmarks.harness): benchmarks import scripts, scripts never import benchmarks
(.importlinter).
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the operating system reports free now (another process may take it before a server binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
