"""The eight-bit formats in a real browser: a person picks float8_e5m2 on Non-associativity and sees the groupings
part, and opens the Summation lab and GPU arithmetic with FP8 from their addresses and sees the FP8 results."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.conftest import RERUN, assert_healthy_page, keyed, pick, screenshot, wait_for_app


def test_picking_float8_e5m2_shows_the_groupings_part(server, page):
    page.goto(f"{server.url}/non_associativity")
    wait_for_app(page)
    pick(page, "na_fmt", "float8_e5m2")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(page.get_by_text("The groupings differ in float8_e5m2: 0.5 versus 0.6").first).to_be_visible(timeout=RERUN)
    expect(keyed(page, "na_fmt").locator("input")).to_have_value("float8_e5m2", timeout=RERUN)
    screenshot(page, "non-associativity-fp8")


def test_the_lab_opens_with_fp8_storage_from_its_address(server, page):
    page.goto(f"{server.url}/summation_lab?storage=float8_e4m3fn&n=5000&permutations=0")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(keyed(page, "sl_storage").locator("input")).to_have_value("float8_e4m3fn", timeout=RERUN)
    expect(page.get_by_text("has no addition of its own").first).to_be_visible(timeout=RERUN)
    expect(page.get_by_text("accumulating in float32").first).to_be_attached(timeout=RERUN)
    screenshot(page, "summation-lab-fp8")


def test_gpu_arithmetic_shows_the_fp8_tensor_core_models(server, page):
    page.goto(f"{server.url}/gpu_arithmetic?inputs=float8_e4m3fn&K=1024")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(keyed(page, "ga_storage").locator("input")).to_have_value("float8_e4m3fn", timeout=RERUN)
    expect(page.get_by_text("DeepSeek-V3 report").first).to_be_visible(timeout=RERUN)
    grid = page.locator('[data-testid="stDataFrame"]').first
    expect(grid).to_be_visible(timeout=RERUN)
    screenshot(page, "gpu-arithmetic-fp8")
