"""scripts.serve: `streamlit run app.py` with a warm-up that starts with the server."""

from __future__ import annotations

import sys
import threading

from scripts import serve


def test_the_warm_up_trains_the_mitigations_pairs_once_into_the_shared_cache():
    from core.crowd.bytecache import RESULTS
    from core.studies.mitigations import PRECISION_DTYPES, training_pair

    lines = []
    took = serve.warm_up(lines.append)
    assert len(lines) == 1 and lines[0].startswith("warm-up done: imports "), lines
    assert took["imports_s"] >= 0 and took["pairs_s"] >= 0
    for dtype in PRECISION_DTYPES:
        kept = RESULTS.get(("mitigations-pair", dtype))
        assert kept is not None and kept.dtype == dtype
        assert training_pair(dtype) is kept  # a page's call reads it, it does not train again
    assert all(name in sys.modules for name in serve.MODULES)


def test_main_runs_streamlit_on_app_py_with_the_options_given_and_warms_up_beside_it(monkeypatch):
    from streamlit.web import cli

    seen, warmed = {}, threading.Event()
    monkeypatch.setattr(cli, "main", lambda: seen.setdefault("argv", list(sys.argv)) and 0)
    ports = []
    monkeypatch.setattr(serve, "_warm_up_quietly", lambda port: (ports.append(port), warmed.set()))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    assert serve.main(["--server.port=8599", "--server.headless=true"]) == 0
    assert seen["argv"] == ["streamlit", "run", "app.py", "--server.port=8599", "--server.headless=true"]
    assert warmed.wait(10) and ports == [8599]  # the talk links are visited on the server's own port


def test_every_talk_link_is_warmed_in_both_modes_and_the_home_page_too():
    from core.studies.talk import scenarios

    links = serve.talk_links()
    assert ("", "") in links and ("", "talk=1") in links
    assert len(links) == 2 + 2 * len(scenarios())
    for _, page, *_ in scenarios():
        stem = page.removeprefix("pages/").removesuffix(".py")
        assert sum(s == stem and q.endswith("talk=1") for s, q in links) >= 1
    assert serve._port(["--server.port", "8600"]) == 8600 and serve._port([]) == 8501


def test_a_server_that_never_answers_is_reported_not_waited_for_forever(monkeypatch):
    monkeypatch.setattr(serve, "_healthy", lambda url, timeout=120.0: False)
    lines = []
    assert serve.visit_talk_links("http://127.0.0.1:9", lines.append) == 0.0
    assert lines == ["warm-up: http://127.0.0.1:9 never answered, the talk links were not visited"]


def test_a_failing_warm_up_is_one_line_and_never_stops_the_server(monkeypatch, capsys):
    def fail(report=None):
        raise RuntimeError("no memory left")

    monkeypatch.setattr(serve, "warm_up", fail)
    serve._warm_up_quietly(8501)
    assert capsys.readouterr().err.strip() == "warm-up stopped: RuntimeError: no memory left"


def test_the_warm_ups_last_line_comes_after_the_freeze(monkeypatch, capsys):
    """Benchmarks and serve_many wait for the warm-up's last line: it is written once the objects the warm-up
    left are frozen, so the crowd that follows meets a warm process whose collector passes are short."""
    import core.machines.native as native

    order = []
    monkeypatch.setattr(serve, "warm_up", lambda: order.append("warm"))
    monkeypatch.setattr(serve, "visit_talk_links",
                        lambda url, report: order.append("visit") or report("warm-up: 16 talk links visited in 1.0 s"))
    monkeypatch.setattr(native, "freeze_long_lived", lambda: order.append("freeze") or 12345)
    serve._warm_up_quietly(8501)
    assert order == ["warm", "visit", "freeze"]
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "warm-up: 16 talk links visited in 1.0 s; 12,345 objects kept out of the collector's passes")
