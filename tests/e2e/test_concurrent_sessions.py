"""Several viewers at once on one server: each sees exactly its own result.

Streamlit serves every browser session from a thread of one process, so anything a page
did to process-global state would leak between viewers. Each browser here picks a
different format and preset at the same moment; every one must read the verdict it gets
when alone (computed independently with core).
"""

from __future__ import annotations

import threading

from core.arith.exact import shortest_repr
from core.arith.formats import get_format
from core.arith.parse import parse_number
from core.machines.devices import cpu_device
from core.studies.assoc import evaluate_triple
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, RERUN, wait_for_app

CASES = [
    ("1e16 − 1e16 + 1 (float64)", "float64", ("1e16", "-1e16", "1")),
    ("2048 + 1 + 1 (float16)", "float16", ("2048", "1", "1")),
    ("256 + 1 + 1 (bfloat16)", "bfloat16", ("256", "1", "1")),
    ("1e8 − 1e8 + 1 (float32)", "float32", ("1e8", "-1e8", "1")),
]


def expected_verdict(fmt_name: str, texts) -> str:
    fmt = get_format(fmt_name)
    r = evaluate_triple(tuple(parse_number(t, fmt) for t in texts), devices=[cpu_device()])
    return f"{shortest_repr(r.left.result, fmt)} versus {shortest_repr(r.right.result, fmt)}"


def _viewer(url: str, preset: str, fmt_name: str, expected: str, barrier: threading.Barrier, out: dict) -> None:
    from playwright.sync_api import expect, sync_playwright

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{url}/non_associativity")
            wait_for_app(page)
            barrier.wait(timeout=120)  # everyone changes settings at the same moment
            page.locator('.st-key-na_preset [data-testid="stSelectbox"]').click()
            page.get_by_role("option", name=preset, exact=True).click()
            verdict = page.locator('.st-key-na_verdict [data-testid="stAlertContentInfo"]')
            expect(verdict).to_contain_text(f"differ in {fmt_name}:", timeout=60_000)  # the rerun has landed
            wait_for_app(page)
            # waited for, not read once: four browsers on two cores repaint late; a verdict leaked from
            # another viewer's settings never turns into this one's
            expect(verdict).to_contain_text(expected, use_inner_text=True, timeout=RERUN)
            expect(page.locator('[data-testid="stException"]')).to_have_count(0, timeout=RERUN)
            out[preset] = (verdict.inner_text(), None)
            browser.close()
    except Exception as err:  # reported by the assertion below
        out[preset] = ("", repr(err))


def test_concurrent_viewers_each_get_their_own_result(server):
    out: dict = {}
    barrier = threading.Barrier(len(CASES))
    threads = [
        threading.Thread(target=_viewer,
                         args=(server.url, preset, fmt_name, expected_verdict(fmt_name, texts), barrier, out))
        for preset, fmt_name, texts in CASES
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for preset, fmt_name, texts in CASES:
        verdict, error = out[preset]
        assert error is None, (preset, error)  # an exception box, or the verdict never became this viewer's
        assert expected_verdict(fmt_name, texts) in verdict, (preset, verdict)
    assert server.proc.poll() is None  # the server is still up
