"""AppTest: the home page tells the story and links to every page that exists."""

from __future__ import annotations

from tests.pages.conftest import all_text


def test_home_renders_the_story(app):
    assert not app.exception
    text = all_text(app)
    for phrase in ("non-associative", "Hardware chooses the order", "Training can amplify",
                   "float64", "Accumulate in a wider format", "compare aggregates"):
        assert phrase in text, phrase
    # training's sensitivity is not stated as universal chaos, nor equal outcomes as a fact
    assert "chaotic" not in text and "equally well" not in text
    assert "depends on the learning rate, the optimizer and the model" in text


def test_the_overview_ends_with_the_storys_next_page(app):
    from ui.navigation import PAGE_TABLE

    assert app.get("page_link")[-1].proto.label == f"Next: {PAGE_TABLE[0][1]}"


def test_the_sidebar_has_the_story_then_your_runs_then_deep_dives():
    from ui.navigation import PAGE_TABLE, SECTIONS, STORY

    assert SECTIONS == ("The story", "Your own runs", "Deep dives")
    story = [title for _, title, *_, section in PAGE_TABLE if section == STORY]
    assert story == ["Non-associativity", "CPU vs GPU", "Training divergence", "Serving an LLM", "Mitigations"]
    assert len(story) + 1 <= 6  # with the overview: at most six pages, about fifteen minutes
    order = [SECTIONS.index(section) for *_, section in PAGE_TABLE]
    assert order == sorted(order)  # the table's order is the reading order: sections never interleave


def test_home_links_to_every_page(app):
    from ui.navigation import PAGE_TABLE

    labels = [p.proto.label for p in app.get("page_link")][1:]  # the first is the mitigations table's
    assert [label.split(":")[0] for label in labels[: len(PAGE_TABLE)]] == [title for _, title, *_ in PAGE_TABLE]
    assert [title for _, title, *_ in PAGE_TABLE][:3] == ["Non-associativity", "CPU vs GPU", "Training divergence"]


def test_talk_mode_scenarios_and_presenter_switch():
    from streamlit.testing.v1 import AppTest

    from core.studies.talk import scenarios
    from tests.pages.conftest import ROOT, TIMEOUT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["talk"] = "1"
    at.run()
    assert not at.exception and at.session_state["presenter"] is True
    # the speaker's first screen: the live numbers, then the talk's links in story order; no sections
    labels = [p.proto.label for p in at.get("page_link")]
    assert labels[:len(scenarios())] == [title for title, *_ in scenarios()]
    assert labels[len(scenarios()):][0].startswith("Make my runs reproducible") and labels[-1].startswith("Next: ")
    assert len(labels) == len(scenarios()) + 2
    # the room's link and its QR code on the overview itself, not in the sidebar
    assert len(at.main.get("image")) == 1 and at.sidebar.get("image") == []
    assert any(m.value.startswith("**For the room:**") for m in at.main.markdown)
    assert at.toggle(key="presenter").value is True
    at.switch_page("pages/summation_lab.py").run()
    assert not at.exception
    assert any(e.label == "More settings" for e in at.expander)
    at.session_state["presenter"] = False  # what the sidebar toggle does
    at.run()
    assert not any(e.label == "More settings" for e in at.expander)


def test_every_page_opens_through_navigation(app):
    app.switch_page("pages/non_associativity.py").run()
    assert not app.exception
    assert app.title[0].value.startswith("Non-associativity")
    app.switch_page("pages/summation_lab.py").run()
    assert not app.exception
    assert app.title[0].value == "Summation lab"
    app.switch_page("pages/training_divergence.py").run()
    assert not app.exception
    assert app.title[0].value == "Training divergence"
    app.switch_page("pages/cpu_vs_gpu.py").run()
    assert not app.exception
    assert app.title[0].value == "CPU vs GPU"
    app.switch_page("pages/mitigations.py").run()
    assert not app.exception
    assert app.title[0].value == "Mitigations and what they cost"


def test_the_first_screen_has_a_live_hook_and_honest_gpu_text(app):
    """The Overview's first screen was text only, and spoke of GPU results none of which is bundled."""
    from core.recordings.store import cached_recordings, recordings_dir

    text = all_text(app)
    assert "`(0.1 + 0.2) + 0.3` = **0.6000000000000001**" in text and "`0.1 + (0.2 + 0.3)` = **0.6**" in text
    assert "live on this server's CPU" in text and "torch.sum, CPU, 1 thread = **" in text
    recs, _ = cached_recordings(recordings_dir())
    if not any(r.is_gpu for r in recs):
        assert "No GPU recording is bundled" in text and "**model**" in text
    assert "recorded GPU results" not in text
    # a visitor (and a speaker's room) cannot act on set-up steps: they live in docs/gpu.md
    assert "python -m scripts" not in text and "FP_RECORDINGS_DIR" not in text


def test_the_mitigations_table_has_the_reproducible_pages_figures_in_one_unit(app):
    """The Overview's costs are the figures Make my runs reproducible shows (one place), each in × the default's
    time; the table links to that page."""
    from core.studies.reproducible import headline_rows

    text = all_text(app)
    assert "| Mitigation | What it buys | Cost, × the default's time |" in text
    for r in headline_rows():
        assert f"| {r.mitigation} | {r.effect} | {r.cost} |" in text
        assert "×" in r.cost
    row = next(line for line in text.splitlines() if line.startswith("| Accept the divergence"))
    effect = [c.strip() for c in row.strip("|").split("|")][1]
    assert "final loss and accuracy" in effect
    assert app.get("page_link")[0].proto.label.startswith("Make my runs reproducible")


def test_a_visitor_who_arrives_with_a_crowd_is_told_the_wait_first(monkeypatch):
    """With runs in progress that hold the server for a second or more (estimated from their measured CPU time),
    the first thing a run draws is a toast that says so; with none, no toast."""
    from streamlit.testing.v1 import AppTest

    from core.crowd import arrivals
    from tests.pages.conftest import ROOT, TIMEOUT

    quiet = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    assert not quiet.exception and not quiet.toast

    busy = arrivals.Arrivals()
    for _ in range(3):
        busy._cpu.append(0.1)  # three runs measured at 0.1 s of CPU each
    busy._running = 30  # thirty in progress: about 3 s ahead of a newcomer
    monkeypatch.setattr(arrivals, "ARRIVALS", busy)
    import ui.crowd

    monkeypatch.setattr(ui.crowd, "ARRIVALS", busy)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    toasts = [t.value for t in at.toast]
    assert toasts == ["30 other page views are being made on this server right now: this one may take about 3 s "
                      "(an estimate from the server time the last views took)."], toasts
    assert busy.running == 30  # the run gave its place back


def test_the_overview_does_not_suggest_rounding_is_the_only_cause(app):
    """With the same seed, random draws differ on a GPU from step 0: its generators are other algorithms."""
    text = " ".join(" ".join(str(m.value).split()) for m in app.markdown)
    assert "random generators are different algorithms" in text and "on a GPU from step 0" in text
