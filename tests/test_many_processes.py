"""scripts.serve_many and deploy/haproxy.cfg without starting a server: the config HAProxy is given, its bounds.

The processes themselves, HAProxy's cookie and a browser's upload through it: tests/e2e/test_many_processes_browser.py.
"""

from __future__ import annotations

import subprocess

import pytest

from scripts import serve_many


def test_the_config_keeps_a_browser_on_one_process_by_haproxys_cookie_not_by_its_address():
    text = serve_many.render("0.0.0.0:8501", [9001, 9002, 9003])
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert "bind 0.0.0.0:8501" in lines
    assert [ln for ln in lines if ln.startswith("server ")] == [
        f"server s{i} 127.0.0.1:{port} cookie s{i}" for i, port in enumerate((9001, 9002, 9003), 1)]
    assert f"cookie {serve_many.COOKIE} insert indirect nocache httponly" in lines
    assert not [ln for ln in lines if ln.startswith("balance source") or "stick on src" in ln]
    assert "option httpchk GET /_stcore/health" in lines and "@" not in text


@pytest.mark.skipif(serve_many.haproxy_path() is None, reason="haproxy is not installed (make test installs "
                    "Debian's haproxy where apt-get and root are available)")
def test_haproxy_itself_accepts_the_config_the_launcher_writes(tmp_path):
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(serve_many.render("127.0.0.1:8501", [9001, 9002]))
    checked = subprocess.run([serve_many.haproxy_path(), "-c", "-f", str(cfg)], capture_output=True, text=True,
                             timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_print_config_starts_nothing_and_says_how_to_start_each_process(capsys):
    argv = ["--processes", "1", "--port", "8600", "--print-config", "--", "--server.maxUploadSize=5"]
    assert serve_many.main(argv) == 0
    out = capsys.readouterr().out
    assert "bind 127.0.0.1:8600" in out and "server s1 127.0.0.1:8601 cookie s1" in out
    assert "python -m scripts.serve --server.port=PORT --server.address=127.0.0.1 --server.headless=true " \
           "--server.maxUploadSize=5, PORT in 8601" in out


def test_a_mistyped_option_is_refused_not_passed_to_streamlit(capsys):
    with pytest.raises(SystemExit):
        serve_many.main(["--proceses", "2", "--print-config"])
    assert "options for streamlit go after --" in capsys.readouterr().err


@pytest.mark.parametrize("n", [0, serve_many.max_processes() + 1])
def test_the_processes_are_bounded_by_the_cores_here(n, capsys):
    with pytest.raises(SystemExit) as stopped:
        serve_many.main(["--processes", str(n), "--print-config"])
    assert stopped.value.code == 2
    assert f"between 1 and {serve_many.max_processes()}" in capsys.readouterr().err
    with pytest.raises(ValueError, match="between 1 and"):
        serve_many.Cluster(n)
