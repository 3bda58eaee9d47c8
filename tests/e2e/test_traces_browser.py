"""Where two runs part, in a real browser at 1280x720: the default pair's first difference and its timeline
are in the first screen (normal and presenter mode); a visitor picks the planted-bug pair and reads "beyond
rounding"; uploads two trace files, one of them broken, and gets a reason next to the uploader, then a
comparison."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from core.traces.files import dumps
from core.traces.pairs import PAIRS, run_pair
from tests.e2e.conftest import RERUN, assert_healthy_page, keyed, pick, screenshot, unfold, until, wait_for_app

WIDTH, HEIGHT = 1280, 720
SLOW = 180_000
HEADLINE = re.compile(r"The runs part at op \d+ of \d+|give the same bits in all \d+ matched ops")
LINE = re.compile(r"first difference: (op \d+ of \d+, aten\.\S+ in \S+: (born here|inherited), "
                  r"(within|beyond) rounding|none in \d+ ops)")


def choose_upload(page) -> None:
    """Pick "upload two trace files", the second choice of where the traces come from (pages/traces.SOURCES)."""
    keyed(page, "tr_source").locator('[data-testid="stRadioOption"]').nth(1).click()
    wait_for_app(page)
    expect(page).to_have_url(re.compile(r"source=upload"), timeout=RERUN)
    expect(page.locator('[data-testid="stFileUploader"]')).to_have_count(2, timeout=RERUN)  # one for each run


def answer(page):
    """The code block with the one-line answer (the first code block is the link box)."""
    return page.locator('[data-testid="stCode"]').filter(has_text="first difference:").first


@pytest.mark.parametrize("talk", ["0", "1"])
def test_first_difference_and_timeline_in_the_first_screen(browser, server, talk):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/traces?talk={talk}")
        punch = page.locator(".st-key-punchline")
        expect(punch).to_contain_text(HEADLINE, timeout=SLOW)
        expect(answer(page)).to_contain_text(LINE, timeout=RERUN)
        wait_for_app(page)
        assert_healthy_page(page)

        # the layout settles after the page's last element arrived
        def in_first_screen(b) -> bool:
            return b is not None and b["y"] >= 0 and b["y"] + b["height"] <= HEIGHT

        box = until(punch.bounding_box, in_first_screen)
        assert in_first_screen(box), box
        chart = punch.locator('[data-testid="stVegaLiteChart"]')
        expect(chart).to_have_count(1, timeout=RERUN)
        def chart_in_first_screen(b) -> bool:
            return b is not None and b["height"] > 60 and b["y"] + b["height"] <= HEIGHT

        cbox = until(chart.bounding_box, chart_in_first_screen)
        assert chart_in_first_screen(cbox), cbox
        screenshot(page, f"traces-1280x720-talk{talk}")
    finally:
        context.close()


def test_a_visitor_finds_the_planted_bug(page, server):
    page.goto(f"{server.url}/traces")
    expect(page.locator(".st-key-punchline")).to_contain_text(HEADLINE, timeout=SLOW)
    wait_for_app(page)
    pick(page, "tr_pair", PAIRS["mlp-planted"].label)
    punch = page.locator(".st-key-punchline")
    expect(punch).to_contain_text("The runs part at op 1 of", timeout=SLOW)
    expect(punch).to_contain_text("beyond rounding", timeout=RERUN)
    expect(answer(page)).to_contain_text("born here, beyond rounding", timeout=RERUN)
    assert_healthy_page(page)
    screenshot(page, "traces-planted")


def test_upload_two_traces_one_broken_first(page, server, tmp_path):
    r = run_pair("mlp-planted")
    a, b = tmp_path / "gpu.json", tmp_path / "laptop.json"
    a.write_text(dumps(r.trace_a))
    b.write_text(dumps(r.trace_b))
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "op-trace", "version": 1}')
    page.goto(f"{server.url}/traces")
    wait_for_app(page, timeout=SLOW)
    choose_upload(page)
    inputs = page.locator('[data-testid="stFileUploader"] input[type="file"]')
    inputs.nth(0).set_input_files(str(a))
    wait_for_app(page)
    inputs.nth(1).set_input_files(str(broken))
    wait_for_app(page)
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="broken.json")  # the reason, beside its uploader
    expect(alert).to_contain_text("is not a valid trace file", timeout=SLOW)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').nth(1).set_input_files(str(b))
    wait_for_app(page)
    expect(answer(page)).to_contain_text("born here, beyond rounding", timeout=SLOW)
    expect(page.get_by_text("Uploaded by you", exact=False)).to_be_visible(timeout=RERUN)
    assert_healthy_page(page)
    screenshot(page, "traces-uploaded", full_page=True)


def test_the_autocast_pair_reads_as_a_format_change(browser, server):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/traces")
        expect(page.locator(".st-key-punchline")).to_contain_text(HEADLINE, timeout=SLOW)
        wait_for_app(page)
        pick(page, "tr_pair", PAIRS["mlp-bf16"].label)
        punch = page.locator(".st-key-punchline")
        expect(punch).to_contain_text("a cast from float32 to bfloat16", timeout=SLOW)
        expect(punch).to_contain_text("format change", timeout=RERUN)
        expect(answer(page)).to_contain_text("(only in B), aten._to_copy.default", timeout=RERUN)
        expect(answer(page)).to_contain_text("format change, float32 to bfloat16", timeout=RERUN)
        expect(page.get_by_text("A format change is expected", exact=False)).to_be_visible(timeout=RERUN)
        assert_healthy_page(page)
        screenshot(page, "traces-autocast-1280x720")
    finally:
        context.close()


def test_a_flipped_argmax_is_named_and_the_commands_wait_in_their_expander(page, server, tmp_path):
    """A visitor uploads two traces of tests/corpus/argmax.py, one with a rounding-sized plant: the punchline says
    where the choice flips, in words; the commands to trace their own model sit in a collapsed expander."""
    from core.traces.models import RunSettings
    from core.traces.run import make_trace

    spec = "tests/corpus/argmax.py:make"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(dumps(make_trace(RunSettings(model=spec))))
    b.write_text(dumps(make_trace(RunSettings(model=spec, perturb_op=1, perturb_size=2.0 ** -22))))
    page.goto(f"{server.url}/traces")
    wait_for_app(page, timeout=SLOW)
    commands = page.locator('[data-testid="stCode"]').filter(has_text="python -m scripts.trace run")
    expect(commands.first).to_be_hidden(timeout=RERUN)  # collapsed until opened
    unfold(page, page.locator('[data-testid="stExpander"]').filter(has=commands).last)  # trace your own model
    expect(commands.first).to_be_visible(timeout=RERUN)
    choose_upload(page)
    inputs = page.locator('[data-testid="stFileUploader"] input[type="file"]')
    inputs.nth(0).set_input_files(str(a))
    wait_for_app(page)
    inputs.nth(1).set_input_files(str(b))
    wait_for_app(page)
    punch = page.locator(".st-key-punchline")
    # (the page shows the sentence inert: a word joiner follows its colon, so the two halves are matched apart)
    expect(punch).to_contain_text("A choice flips at op 3, aten.argmax in model", timeout=SLOW)
    expect(punch).to_contain_text("a rounding-sized difference in its input changed its choice", timeout=RERUN)
    expect(answer(page)).to_contain_text("a choice flips at op 3, aten.argmax.default in model", timeout=RERUN)
    assert_healthy_page(page)
    screenshot(page, "traces-flip")
