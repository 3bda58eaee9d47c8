"""The visitor's own GPU, through WebGPU, in real headless Chromium: with --enable-unsafe-webgpu it has an adapter
(SwiftShader, Vulkan on the CPU's threads), and the real shaders run on it. Without the flag it has none, and the
page says so in one line."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from playwright.sync_api import expect

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FORMATS, bits_of, value_of_bits
from core.arith.metrics import a_priori_bound
from core.arith.numpy_stream import digest, recipe
from core.arith.vectors import VectorSpec, generate
from core.kernels import webgpu
from core.kernels.sums import sequential
from tests.e2e.conftest import (
    CHROMIUM,
    CHROMIUM_ARGS,
    RERUN,
    assert_healthy_page,
    button,
    folded_section,
    keyed,
    open_folded,
    open_section_with_icon,
    screenshot,
    wait_for_app,
)
from ui.your_gpu import component_source

F32 = FORMATS["float32"]
WEBGPU_ARGS = [*CHROMIUM_ARGS, "--enable-unsafe-webgpu"]
LIVE = 180_000  # ms: the vector is built and seven kernels run on SwiftShader, beside a busy test run


@pytest.fixture(scope="module")
def gpu_browser(playwright_instance):
    b = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=WEBGPU_ARGS)
    yield b
    b.close()


@pytest.fixture
def gpu_page(gpu_browser):
    context = gpu_browser.new_context(viewport={"width": 1280, "height": 720})
    pg = context.new_page()
    yield pg
    context.close()


def expect_live(page) -> None:
    live = page.locator(".st-key-your_gpu")
    punch = page.locator(".st-key-punchline")
    expect(punch).to_contain_text("Your GPU, live", timeout=LIVE)
    kernels = page.get_by_text(re.compile(r"Your GPU's kernels one by one \(\w+"))  # named by the adapter
    expect(kernels).to_be_visible(timeout=RERUN)
    if "talk=1" not in page.url:  # on a slide the sentence is the metric's help: the speaker says it
        expect(punch).to_contain_text("the model predicted its bits exactly", timeout=RERUN)
    kernels.click()
    expect(live).to_contain_text(re.compile(r"Live on your GPU \(\w+"), timeout=RERUN)
    expect(live).to_contain_text("your GPU gave the CPU's bits", timeout=RERUN)
    expect(live).to_contain_text("the model matched your GPU bit for bit", timeout=RERUN)
    expect(live.locator('[data-testid="stDataFrame"]').first).to_be_visible(timeout=RERUN)
    assert_healthy_page(page)


def test_your_gpu_at_the_pages_defaults(server, gpu_page):
    gpu_page.goto(f"{server.url}/cpu_vs_gpu")
    expect_live(gpu_page)
    expect(gpu_page.locator(".st-key-your_gpu")).to_contain_text(re.compile(r"\d different sums? from 8 runs"))
    screenshot(gpu_page, "your-gpu-defaults")


def test_your_gpu_at_the_talks_link(server, gpu_page):
    gpu_page.goto(f"{server.url}/cpu_vs_gpu?vector=normal&n=1000000&format=float32&talk=1")
    expect_live(gpu_page)
    screenshot(gpu_page, "your-gpu-talk")


def test_without_webgpu_one_line_says_why(server, page):
    page.goto(f"{server.url}/cpu_vs_gpu")
    line = page.locator(".st-key-your_gpu")
    expect(line).to_contain_text("Your GPU, live: not here: the browser gave no GPU adapter", timeout=LIVE)
    wait_for_app(page)
    assert_healthy_page(page)
    expect(page.locator(".st-key-punchline")).to_contain_text("Neither device is the reference")


def test_another_format_says_what_runs(server, gpu_page):
    gpu_page.goto(f"{server.url}/cpu_vs_gpu?format=bfloat16")
    expect(gpu_page.locator(".st-key-your_gpu")).to_contain_text("choose float32", timeout=RERUN)
    assert_healthy_page(gpu_page)


# -------------------------------------------------------------------------------- the kernels, vector by vector

KINDS = ("normal", "uniform", "lognormal", "alternating")
LENGTHS = (1, 2, 3, 255, 256, 257, 4_097, webgpu.LANES - 1, webgpu.LANES, webgpu.LANES + 1, 100_000)
LARGEST = VectorSpec(kind="normal", n=1_000_000, seed=99, storage="float32")  # the talk's size, once


def special_vectors() -> list[np.ndarray]:
    """Values random draws rarely give: -0 alone, ±0 mixed, the largest finite values, a sum that overflows."""
    big = float(np.finfo(np.float32).max)
    return [np.array(v, dtype=np.float32) for v in (
        [-0.0], [-0.0, -0.0, 0.0], [big, -big, 1.0, 2.0**-20] * 700, [big / 2] * 5 + [1.0], [1.0, 2.0**-24] * 9000)]


def run_in_page(page, job: dict) -> dict:
    return page.evaluate("""async (job) => {
      window.__device = window.__device || await window.__gpu.openGpu();  // one device for every vector
      const gpu = window.__device;
      const x = job.recipe ? await window.__gpu.buildVector(job.recipe)
                           : new Float32Array(new Uint32Array(job.bits).buffer);
      const k = await window.__gpu.onGpu(gpu, x, job.lanes, job.groups);
      const out = { digest: window.__gpu.digest(x), sequential: await k.sequential(), tree: await k.tree(),
                    atomic: await k.atomic(3) };
      if (gpu.hasSubgroups) out.subgroup = await k.subgroup();
      k.release();
      return out;
    }""", job)


def test_the_kernels_against_the_model_on_many_vectors(server, gpu_page):
    """Every vector: the browser's replay is the server's vector (digest), left to right gives the CPU's bits, the
    workgroup tree gives the model's bits, and the subgroup and atomic sums lie within the any-order bound."""
    gpu_page.goto(f"{server.url}/_stcore/health")  # a page of this origin: a secure context, as the app's
    gpu_page.add_script_tag(content=component_source() + "\nwindow.__gpu = { openGpu, onGpu, buildVector, digest };",
                            type="module")
    gpu_page.wait_for_function("window.__gpu !== undefined")
    cases = [(VectorSpec(kind=k, n=n, seed=i, storage="float32"), None)
             for i, (k, n) in enumerate((k, n) for n in LENGTHS for k in KINDS)] + [(LARGEST, None)]
    cases += [(None, v) for v in special_vectors()]
    assert len(cases) >= 50
    for spec, values in cases:
        job = {"lanes": webgpu.LANES, "groups": webgpu.GROUPS}
        if spec is not None:
            values = generate(spec).values
            job["recipe"] = recipe(spec)
        else:
            job["bits"] = [bits_of(v) for v in values]
        got = run_in_page(gpu_page, job)
        what = spec or f"special vector of {values.size}"
        if spec is not None:
            assert tuple(got["digest"]) == digest(values), what
        assert got["sequential"] == bits_of(sequential(values)), what
        assert got["tree"] == bits_of(webgpu.workgroup_tree(values)), what
        finite = np.isfinite(webgpu.workgroup_tree(values))
        if finite:
            exact = exact_sum_fraction(values)
            bound = a_priori_bound("sequential", values.size, exact_sum_fraction(np.abs(values)), F32)
            for b in got["atomic"] + ([got["subgroup"]["bits"]] if "subgroup" in got else []):
                v = value_of_bits(b, F32)
                assert not isinstance(v, float) and abs(v - exact) <= bound, what


def test_your_gpus_download_round_trips_through_the_upload(server, gpu_page, tmp_path):
    """The live results download as a recording; uploaded on the same page, they join it as the visitor's own
    WebGPU recording, and the model's match is measured on them."""
    gpu_page.goto(f"{server.url}/cpu_vs_gpu?n=10000")
    expect_live(gpu_page)
    with gpu_page.expect_download(timeout=RERUN) as dl:
        button(gpu_page, "yg_download").click()
    path = tmp_path / dl.value.suggested_filename
    dl.value.save_as(path)
    assert path.name.startswith("webgpu-") and path.suffix == ".json"
    open_section_with_icon(gpu_page, "upload_file")  # bring your own GPU's capture
    gpu_page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    card = gpu_page.locator('[data-testid="stAlert"]').filter(has_text="recorded on a GPU through WebGPU")
    expect(card).to_be_visible(timeout=LIVE)
    expect(card).to_contain_text(path.name)
    open_folded(gpu_page, "cg_open_model")
    main = gpu_page.locator('[data-testid="stMain"]')
    expect(main).to_contain_text("1 of 1 sums bit-identical (100%); WebGPU workgroup-tree model vs", timeout=LIVE)
    expect(main).to_contain_text(re.compile(r"recorded through WebGPU in \w+ \d+ on"))
    assert_healthy_page(gpu_page)


# -------------------------------------------------------------------------------- the room's GPUs

ROOM_LINK = "/cpu_vs_gpu?vector=normal&n=10000&format=float32&room=on&talk=1"  # the talk's mechanism, lighter


def forge_reports(route) -> None:
    """Relay a page's websocket to the server, rewriting every report of its GPU in flight to claim a sum no order
    can give: what any client speaking Streamlit's protocol could send."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    server = route.connect_to_server()

    def to_server(message) -> None:
        if isinstance(message, bytes | bytearray):
            msg = BackMsg()
            msg.ParseFromString(bytes(message))
            for w in msg.rerun_script.widget_states.widgets:
                if w.id.endswith("yg_runner") and w.WhichOneof("value") == "json_value":
                    state = json.loads(w.json_value)
                    if isinstance(state.get("report"), dict) and state["report"].get("status") == "ok":
                        state["report"]["tree"] = bits_of(np.float32(1e9))
                        w.json_value = json.dumps(state)
            message = msg.SerializeToString()
        server.send(message)

    route.on_message(to_server)


def test_ten_viewers_add_their_gpus_and_a_forged_one_is_refused(server, gpu_browser):
    from core.crowd.room import Room

    Room().reset()  # the server's room: the same file, for this checkout
    speaker = gpu_browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
    speaker.goto(server.url + ROOM_LINK)
    tally = speaker.locator(".st-key-the_room")
    expect(tally).to_contain_text("0 answered", timeout=LIVE)
    viewers = [gpu_browser.new_context(viewport={"width": 390, "height": 844}).new_page() for _ in range(10)]
    for v in viewers:
        v.goto(server.url + ROOM_LINK)
    for v in viewers:
        expect_live(v)
        button(v, "yg_room_add").click()
        expect(v.get_by_text("Added: the speaker's screen counts your GPU")).to_be_visible(timeout=RERUN)
    expect(tally).to_contain_text("10 answered", timeout=RERUN)  # presenter mode refreshes the tally by itself
    expect(tally.locator('[data-testid="stDataFrame"]')).to_be_visible()
    screenshot(speaker, "room-ten-gpus")

    forger = gpu_browser.new_context().new_page()
    forger.route_web_socket(re.compile(r".*/_stcore/stream"), forge_reports)
    forger.goto(server.url + ROOM_LINK)
    expect(forger.locator(".st-key-your_gpu")).to_contain_text("refused as impossible", timeout=LIVE)
    expect(keyed(forger, "yg_room_add")).to_have_count(0)
    assert_healthy_page(forger)
    assert len(Room().entries()) == 10
    expect(tally).to_contain_text("10 answered", timeout=RERUN)
    for p in [speaker, forger, *viewers]:
        p.context.close()


def test_three_numbers_on_your_gpu_give_the_cpus_bits(server, gpu_page):
    """Non-associativity's float32 preset on the visitor's GPU: both groupings, the CPU's bits each (float32 is the
    same format there); the section runs it once opened."""
    from urllib.parse import quote

    gpu_page.goto(f"{server.url}/non_associativity?preset={quote('1e8 − 1e8 + 1 (float32)')}")
    wait_for_app(gpu_page)
    open_folded(gpu_page, "na_open_devices")  # the same additions on each device here
    section = folded_section(gpu_page, "na_open_devices")
    expect(section).to_contain_text(re.compile(r"Live on your GPU \(\w+"), timeout=LIVE)
    expect(section).to_contain_text("the same bits as this server's CPU, grouping by grouping")
    assert_healthy_page(gpu_page)
