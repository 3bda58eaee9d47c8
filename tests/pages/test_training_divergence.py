"""AppTest: the Training divergence page steps, plays, resets and runs its mitigations."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from core.arith.metrics import ulps_count
from core.training.differences import PLAIN
from core.training.divergence import DEFAULT_SPEED, boundary_flip, postponement, seed_streams, seed_verdict
from core.training.mlp import DEFAULT_PRESET, PRESETS, TrainSettings, network_name
from core.training.pair import PairedRun
from core.training.seeds import seed_study, summarize
from tests.pages.conftest import ROOT, TIMEOUT, all_text, reader, shown
from ui.talk import PRESENTER_MIN_HEIGHT
from ui.training_view import LIVE_HEIGHT


@pytest.fixture
def td() -> AppTest:
    return reader("training_divergence", TIMEOUT).run()


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_starts_paused_with_the_default_preset(td):
    assert not td.exception
    assert td.session_state["td_run"].done == 0
    assert "Press Play" in all_text(td)
    assert td.session_state["td_source"] == "permute_hidden"


def test_step_applies_one_update_and_shows_both_losses_with_bits(td):
    td.button(key="td_step").click().run()
    assert not td.exception
    run = td.session_state["td_run"]
    assert run.done == 1
    text = all_text(td)
    assert f"{run.records[0].loss_a:.9g}" in text and "fp-bits" in text  # full float32 digits, bit pattern
    td.button(key="td_step10").click().run()
    assert td.session_state["td_run"].done == 11


def test_after_one_step_the_page_names_what_differs_as_the_record_says():
    """After one Step the losses were bit-identical, yet "First step that differs" said 1 (the weights)."""
    at = open_link(steps="20")
    at.button(key="td_step").click().run()
    assert not at.exception
    first = at.session_state["td_run"].records[0]
    m = metrics(at)
    loss_same = first.loss_a_bits == first.loss_b_bits
    assert m["Loss differs from step"] == ("not yet" if loss_same else "1")
    assert m["Weights differ from step"] == ("1" if first.differing_bits else "not yet")
    assert "First step that differs" not in m
    text = all_text(at)
    if loss_same and first.differing_bits:  # the default pair on the CPUs measured so far
        assert "Losses bit-identical so far; the weights differ since step 1." in text
    # both live charts exist after one step and neither is empty: a point each, or the message inside
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")][:2]
    loss_layers, gap_layers = specs[0]["layer"], specs[1]["layer"]
    assert any(lay["mark"]["type"] == "circle" for lay in loss_layers)  # one step: one point per run
    marks = [lay["mark"] for lay in gap_layers]
    assert any(isinstance(mk, dict) and mk.get("point") for mk in marks)
    gap_bytes = at.get("vega_lite_chart")[1].proto.SerializeToString()  # its data sets travel beside the spec
    assert (b"losses bit-identical so far (1 step)" in gap_bytes) == loss_same


def test_the_speed_control_sets_the_steps_per_frame_and_travels_in_the_link():
    at = open_link(steps="30", speed="2")
    assert not at.exception
    assert at.session_state["td_speed"] == 2
    at.selectbox(key="td_speed").select(25).run()
    assert at.query_params["speed"] == "25"
    at.button(key="td_play").click().run()
    assert not at.exception and at.session_state["td_run"].finished
    bad = open_link(speed="3")  # not an offered speed: the default, and a note
    assert bad.session_state["td_speed"] == DEFAULT_SPEED
    assert "speed" in all_text(bad)


def test_play_draws_every_speed_steps(monkeypatch):
    """The Play loop draws the pair every `speed` steps (each live frame is one draw_pair call)."""
    import ui.training_view as view

    frames = []
    real = view.draw_pair

    def counting(run, settings, slots, live=False, details=True):
        if live:
            frames.append(run.done)
        return real(run, settings, slots, live, details)

    monkeypatch.setattr(view, "draw_pair", counting)
    at = open_link(steps="12", speed="5")
    at.button(key="td_play").click().run()
    assert not at.exception
    assert frames == [5, 10]  # the last 2 steps end the run: the page is drawn again from the top


def test_play_runs_to_the_end_and_matches_core(td):
    td.button(key="td_play").click().run()
    assert not td.exception
    run = td.session_state["td_run"]
    assert run.finished and run.done == 500
    expected = summarize(PairedRun(TrainSettings()).run(500))
    m = metrics(td)
    assert m["Loss gap first > 1% at step"] == str(expected.first_rel_1pct)
    assert m["‖Δθ‖ doubles every"] == f"{expected.doubling_steps:.1f} steps"
    assert len(td.get("vega_lite_chart")) >= 5  # losses, gaps, bits, two decision boundaries
    td.button(key="td_reset").click().run()
    assert td.session_state["td_run"].done == 0


def test_changing_a_setting_starts_a_new_pair(td):
    td.button(key="td_step").click().run()
    td.selectbox(key="td_source").select("none").run()
    assert td.session_state["td_run"].done == 0
    td.button(key="td_step10").click().run()
    assert metrics(td)["Loss differs from step"] == "not yet" and metrics(td)["Weights differ from step"] == "not yet"
    assert "So far A and B are bit-identical: losses and weights." in all_text(td)
    td.number_input(key="td_lr").set_value(0.2).run()
    assert td.session_state["td_run"].settings.lr == 0.2 and td.session_state["td_run"].done == 0


def test_presets_load_their_settings(td):
    name = "bfloat16 autocast"
    td.selectbox(key="td_preset").select(name).run()
    assert not td.exception
    assert td.session_state["td_run"].settings == PRESETS[name].settings
    assert PRESETS[name].note in all_text(td)


def test_float64_mitigation_and_seed_study(td):
    td.number_input(key="td_steps").set_value(200).run()
    td.button(key="td_f64").click().run()
    assert not td.exception
    text = all_text(td)
    # the step is this machine's own (another CPU gives other bits): the page must show what core computes here
    f32 = summarize(PairedRun(TrainSettings(steps=200)).run(200)).first_rel_1pct
    f64 = summarize(PairedRun(TrainSettings(steps=200, dtype="float64")).run(200)).first_rel_1pct
    assert f32 is not None and (f64 is None or f64 > f32)  # the invariant: float64 parts much later, or never
    assert f"float32 pair: first more than 1% apart at step **{f32}**" in text
    assert f"float64 pair: **{f64 or 'not within 200 steps'}**" in text
    td.number_input(key="td_k").set_value(2).run()
    td.button(key="td_seeds").click().run()
    assert not td.exception
    summary = td.dataframe[-1].value
    assert list(summary.index) == ["A", "B"]


def open_link(**params) -> AppTest:
    at = reader("training_divergence", TIMEOUT)
    at.query_params.update(params)
    return at.run()


WIDGET_OF = {"source": "td_source", "dtype": "td_dtype", "optimizer": "td_opt", "lr": "td_lr", "steps": "td_steps",
             "seed": "td_seed"}


@pytest.mark.parametrize("name", [n for n in PRESETS if PRESETS[n].settings != PRESETS[DEFAULT_PRESET].settings])
def test_a_preset_link_sets_every_setting_of_its_preset(name):
    """?preset=... set only the preset's name; the run used the default settings."""
    at = open_link(preset=name)
    assert not at.exception
    want = PRESETS[name].settings
    assert at.session_state["td_run"].settings == want
    for attr, key in WIDGET_OF.items():
        assert at.session_state[key] == getattr(want, attr), attr
    assert "Changed from this preset" not in all_text(at)
    # the link this page writes back carries every setting, and reopening it gives the same run
    assert at.query_params["difference"] == want.source and at.query_params["steps"] == str(want.steps)
    again = open_link(**dict(at.query_params))
    assert again.session_state["td_run"].settings == want


def test_settings_named_in_a_preset_link_win_and_the_page_says_they_differ():
    at = open_link(preset="One thread vs all threads", lr="0.2", steps="30")
    assert not at.exception
    s = at.session_state["td_run"].settings
    assert (s.source, s.lr, s.steps) == ("threads", 0.2, 30)
    assert "Changed from this preset: learning rate, steps" in all_text(at)


def test_after_a_preset_link_the_visitors_own_steps_survive_reruns():
    at = open_link(preset="bfloat16 autocast")
    at.button(key="td_step10").click().run()
    at.button(key="td_step").click().run()
    assert at.session_state["td_run"].done == 11
    assert at.session_state["td_run"].settings == PRESETS["bfloat16 autocast"].settings


def test_reopening_a_scenario_link_opens_ready_to_play():
    """Reopening 'Watch two runs diverge' showed the finished old run with Play disabled."""
    at = open_link(preset=DEFAULT_PRESET, steps="20")
    at.button(key="td_play").click().run()
    assert at.session_state["td_run"].finished and at.button(key="td_play").disabled
    at.query_params.clear()
    at.query_params.update({"preset": DEFAULT_PRESET, "steps": "20"})  # the scenario link, clicked again
    at.run()
    assert not at.exception
    assert at.session_state["td_run"].done == 0
    assert not at.button(key="td_play").disabled and not at.button(key="td_step").disabled


def test_reset_after_play_enables_play_and_step_at_once():
    """Reset after Play left Play and Step disabled until Reset was pressed again."""
    at = open_link(steps="20")
    at.button(key="td_play").click().run()
    assert at.button(key="td_play").disabled and at.button(key="td_step").disabled
    at.button(key="td_reset").click().run()
    assert not at.exception
    assert at.session_state["td_run"].done == 0
    assert not at.button(key="td_play").disabled and not at.button(key="td_step").disabled
    at.button(key="td_step").click().run()
    assert at.session_state["td_run"].done == 1


def test_play_reaches_the_end_bit_identical_to_a_clean_run():
    at = open_link(steps="120")
    at.button(key="td_play").click().run()
    assert not at.exception
    got = at.session_state["td_run"].records
    clean = PairedRun(TrainSettings(steps=120)).run(120)
    assert [(r.loss_a_bits, r.loss_b_bits, r.differing_bits) for r in got] == [
        (r.loss_a_bits, r.loss_b_bits, r.differing_bits) for r in clean]


def test_the_seed_study_keeps_the_float64_chart_and_shows_a_verdict():
    """'Train the seeds' wiped the float64-pair chart shown just above it."""
    at = open_link(steps="30")
    at.button(key="td_f64").click().run()
    assert not at.exception
    charts_before = len(at.get("vega_lite_chart"))
    at.number_input(key="td_k").set_value(2).run()
    at.button(key="td_seeds").click().run()
    assert not at.exception
    text = all_text(at)
    assert ("float32 pair: first more than 1% apart at step **" in text
            or "float32 pair: never more than 1% apart" in text)
    assert "**Verdict:**" in text
    assert len(at.get("vega_lite_chart")) == charts_before + 2  # both seed charts added, the float64 one kept
    at.button(key="td_step").click().run()  # and both survive the training buttons
    assert "**Verdict:**" in all_text(at) and "float32 pair:" in all_text(at)
    at.number_input(key="td_seed").set_value(5).run()  # other settings: the old results are not shown as theirs
    assert "**Verdict:**" not in all_text(at) and "float32 pair:" not in all_text(at)


def test_the_seed_study_reports_progress_and_stops_when_its_progress_raises():
    """At the core level, a long study stays stoppable: it calls back between chunks, and a raise stops it at once."""
    calls = []

    class Stop(Exception):
        pass

    def progress(p):
        calls.append((p.done, p.total))
        if len(calls) == 3:
            raise Stop

    with pytest.raises(Stop):
        seed_study(TrainSettings(steps=200), 4, progress)
    assert len(calls) == 3 and calls[-1][0] < 200 and all(t == 800 for _, t in calls)


def _layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def test_every_chart_has_axis_titles_a_legend_for_its_series_and_room_to_plot():
    """Loss lines merged with no legend, the bits strip kept about 15 px, boundaries were stripes."""
    at = open_link(steps="40")
    at.button(key="td_play").click().run()
    at.button(key="td_f64").click().run()
    at.number_input(key="td_k").set_value(2).run()
    at.button(key="td_seeds").click().run()
    assert not at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert len(specs) == 9  # loss, relative gap, log gaps, bits, two boundaries, float32/float64, two seed charts
    for i, spec in enumerate(specs):
        # Streamlit's theme fits title, axes and legend inside the height: leave the plot room (the two
        # live charts beside the controls are compact, with short axis titles and the legend inside)
        assert spec["height"] >= (LIVE_HEIGHT if i < 2 else 250), spec.get("title")
        for layer in _layers(spec):
            enc = layer.get("encoding", {})
            for axis in ("x", "y"):
                stacked = i == 0 and axis == "x"  # the loss chart above the relative gap, whose step axis says it
                if axis in enc and enc[axis].get("axis", {}) is not None and layer is _layers(spec)[0] and not stacked:
                    assert enc[axis].get("title"), (spec.get("title"), axis)
            colour = enc.get("color", {})
            if "field" in colour and colour["field"] != enc.get("x", {}).get("field"):
                legends = [lay["encoding"]["color"].get("legend", {}) for lay in _layers(spec)
                           if "field" in lay.get("encoding", {}).get("color", {})]
                assert any(lg is not None for lg in legends), spec.get("title")
    loss = specs[0]["layer"][0]["encoding"]
    # A and B differ in colour, dash and width, one legend for all three (same field, same legend)
    assert {loss[c]["field"] for c in ("color", "strokeDash", "strokeWidth")} == {"run"}
    assert len({json.dumps(loss[c].get("legend")) for c in ("color", "strokeDash", "strokeWidth")}) == 1
    assert loss["color"]["scale"]["range"] == ["#0072B2", "#E69F00"]  # blue and orange, not two blues
    assert loss["strokeDash"]["scale"]["range"][0] != loss["strokeDash"]["scale"]["range"][1]
    assert specs[1]["layer"][0]["encoding"]["y"]["scale"].get("type", "linear") == "linear"  # the linear view
    for boundary in specs[4:6]:
        cells = boundary["layer"][0]
        assert cells["mark"]["type"] == "rect" and {"x2", "y2"} <= set(cells["encoding"])  # tiles, no gaps


def test_the_preset_cites_each_recorded_machine_with_its_provenance(td):
    """The step at which a pair parts depends on the machine: the page cites recordings, never one number.
    Every real machine bundled is listed (all three), the configuration captures folded away."""
    from core.recordings.compare import machine_partings, real_machines
    from core.recordings.store import cached_recordings

    recs = cached_recordings()[0]
    rows = machine_partings(recs, DEFAULT_PRESET)
    machines = [r for r in rows if r.configuration is None]
    assert len(machines) == len(real_machines(recs)) >= 3  # the bundled recordings hold the default preset
    caption = shown(next(c.value for c in td.caption if "recorded machines, this pair is more than 1%" in c.value))
    assert caption.startswith(f"On {len(machines)} recorded machines")
    for r in machines:
        assert r.label.startswith("recorded on ") and f"from step {r.step}, {r.label}" in caption
    (folded,) = [e for e in td.expander if e.label.startswith("The same hardware in other numeric configurations")]
    inside = shown(" ".join(c.value for c in folded.caption)).lower()
    assert all(f"from step {r.step}, {r.label}".lower() in inside for r in rows if r.configuration)
    assert "113" not in PRESETS[DEFAULT_PRESET].note and "135" not in PRESETS[DEFAULT_PRESET].note


def test_the_one_thread_preset_says_why_it_can_stay_identical(td):
    """The one-thread preset showed no difference without saying why."""
    from core.training.divergence import threads_note

    td.selectbox(key="td_preset").select("One thread vs all threads").run()
    assert not td.exception
    expected = threads_note(PRESETS["One thread vs all threads"].settings).text()
    assert expected in [c.value for c in td.caption]
    assert "On this server" in expected


def test_presenter_mode_folds_the_settings_and_keeps_the_live_view():
    """Presenter mode made the page about 30% longer; its settings now fold."""
    at = reader("training_divergence", TIMEOUT)
    at.session_state["presenter"] = True
    at.query_params.update({"steps": "20"})
    at.run()
    assert not at.exception
    labels = [e.label for e in at.expander]
    assert "Settings: preset, what differs, format, optimizer, steps" in labels
    at.button(key="td_step").click().run()
    assert not at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert specs[0]["height"] >= PRESENTER_MIN_HEIGHT and specs[1]["height"] >= PRESENTER_MIN_HEIGHT
    assert specs[0]["config"]["axisLeft"]["titleAngle"] == 0  # horizontal: a long title cannot squash the plot
    normal = open_link(steps="20")
    assert not any(e.label.startswith("Settings:") for e in normal.expander)


# ------------------------------------------------------------------ the story's first screen and its depth

DEPTH = ("Do A and B end equally good? In the study cited inside, about as far apart as two seeds: train "
         "several seeds per side", "Same seed, other random numbers?",
         "Does float64 cure it?", "A jump with no growth before it: one input, two classes")


def test_the_insight_and_the_network_come_first_and_name_what_differs_in_plain_words(td):
    """The intro came after the charts and said "chosen below" and "further down"; the threads preset's heading read
    "cpu thread count: b runs with 1 thread, a with all"; the network was never named."""
    first = td.markdown[0].value
    assert first.startswith("**One difference in the last bit can grow with every training step")
    assert f"the same {network_name(TrainSettings())} on noisy spirals" in first and "2-64-64-3 tanh MLP" in first
    assert PLAIN["permute_hidden"] in first
    text = all_text(td)
    assert "chosen below" not in text and "further down" not in text
    threads = open_link(preset="One thread vs all threads")
    assert "Run B uses 1 CPU thread, run A all of them." in threads.markdown[0].value
    assert "cpu thread count" not in all_text(threads).lower()
    # the depth folds away, in normal mode too: every section below the pair is a collapsed expander
    closed = AppTest.from_file(str(ROOT / "pages" / "training_divergence.py"), default_timeout=TIMEOUT).run()
    labels = [e.label for e in closed.expander]
    assert all(any(label.startswith(d) for label in labels) for d in DEPTH), labels
    assert all(not e.proto.expanded for e in closed.expander if e.label.startswith(DEPTH))
    # and made only once opened: the fixture's reader opened them
    assert len(td.expander) == len(closed.expander) and len(all_text(td)) > len(all_text(closed))


def test_a_reload_keeps_the_step_the_run_had_reached():
    """F5 after Play brought the pair back to step 0: the step travels in the URL and a reload replays to it."""
    at = open_link(steps="40")
    at.button(key="td_step10").click().run()
    at.button(key="td_step").click().run()
    assert at.session_state["td_run"].done == 11 and at.query_params["step"] == "11"
    reloaded = open_link(**dict(at.query_params))  # a new session from the same address: what F5 does
    assert not reloaded.exception
    run = reloaded.session_state["td_run"]
    assert run.done == 11 and reloaded.query_params["step"] == "11"
    clean = PairedRun(TrainSettings(steps=40)).run(11)
    assert [(r.loss_a_bits, r.loss_b_bits, r.differing_bits) for r in run.records] == [
        (r.loss_a_bits, r.loss_b_bits, r.differing_bits) for r in clean]
    assert "After step 11" in all_text(reloaded)
    reloaded.button(key="td_step").click().run()  # and it carries on from there
    assert reloaded.session_state["td_run"].done == 12 and reloaded.query_params["step"] == "12"
    reloaded.button(key="td_reset").click().run()
    assert reloaded.session_state["td_run"].done == 0 and "step" not in reloaded.query_params
    played = open_link(steps="25")
    played.button(key="td_play").click().run()
    assert played.query_params["step"] == "25"
    assert open_link(**dict(played.query_params)).session_state["td_run"].finished


def test_the_scenario_link_still_opens_a_fresh_pair_ready_to_play():
    from core.studies.talk import scenarios

    (params,) = [p for title, _, p, _ in scenarios() if title == "Watch two runs diverge"]
    at = open_link(**params)
    assert not at.exception and at.session_state["td_run"].done == 0
    assert at.session_state["td_preset"] == params["preset"] and not at.button(key="td_play").disabled


def test_the_seed_verdict_decides_what_is_said_about_the_outcomes():
    """"The distribution of outcomes does not depend on which side" was shown even where the verdict was
    "systematic"; now the sentence is the verdict's own."""
    at = open_link(preset="bfloat16 autocast", steps="30")
    at.number_input(key="td_k").set_value(3).run()
    at.button(key="td_seeds").click().run()
    assert not at.exception
    _, study = at.session_state["td_seed_result"]
    verdict = seed_verdict(study)
    text = all_text(at)
    assert verdict.outcome_words(3) in text
    assert ("does not measurably depend on the side" in text) == verdict.inside
    assert "does not depend on which side" not in text
    assert "https://doi.org/10.1145/3324884.3416545" in shown(text)


def test_the_float64_section_states_the_prediction_and_what_the_float64_pair_shows():
    at = open_link(preset="Fast chaos (SGD, lr 0.8)", steps="150")
    at.button(key="td_f64").click().run()
    assert not at.exception
    f32, f64 = at.session_state["td_f64_result"]
    plan = postponement(150, f32.distances, f32.first_rel_1pct, f64.distances, f64.first_rel_1pct)
    text = all_text(at)
    assert all(sentence in text for sentence in plan.words(PLAIN["permute_hidden"]))
    assert len(f32.distances) == 150 and plan.doubling is not None


def test_the_jump_section_shows_an_input_whose_class_flips():
    at = open_link(steps="30")
    at.button(key="td_flip").click().run()
    assert not at.exception
    flip = boundary_flip(TrainSettings(steps=30))
    text = all_text(at)
    assert f"yet A predicts class **{flip.class_a}** and B class **{flip.class_b}**" in text
    assert f"({flip.point[0]:.9g}, {flip.point[1]:.9g})" in text
    # a fraction of a ULP is written as one, not rounded to "0 ULPs"
    assert f"differ by at most {ulps_count(flip.logit_ulps)}, yet" in text and " 0 ULPs" not in text


def test_same_seed_says_what_holds_live():
    at = open_link(steps="30")
    text = all_text(at)
    streams = seed_streams(TrainSettings(steps=30))
    assert f"{streams.parameters:,} initial weights" in text and "drawn again, the same bits" in text
    assert "https://pytorch.org/docs/stable/notes/randomness.html" in shown(text)
    assert "https://github.com/pytorch/pytorch/issues/2976" in shown(text)


def test_before_a_first_step_the_default_pair_says_where_it_parts(td):
    """The charts are empty until Play: at the defaults the first screen says in words where this pair parts, from
    the pair trained once to the end on this server (the same settings, so the same bits Play draws)."""
    from core.studies.mitigations import training_pair

    assert not td.exception
    pair = training_pair("float32")
    said = " ".join(i.value for i in td.info)
    assert "Press Play to train both runs live" in said
    if pair.first_rel_1pct:
        assert f"first more than 1% apart at step **{pair.first_rel_1pct}** of {pair.steps}" in said, said
    else:
        assert f"stay within 1% for all {pair.steps} steps" in said, said


def test_do_they_end_equally_good_is_answered_before_any_training(td):
    """The learner's question has its answer, with its source's address, in the section it names, before a seed is
    trained (the verdict and Pham et al. come after the seed study)."""
    section = next(e for e in td.expander if e.label.startswith("Do A and B end equally good?"))
    from tests.pages.conftest import shown

    text = shown(" ".join(m.value for m in section.markdown))
    assert "about as far apart as two seeds" in text and "https://arxiv.org/abs/2103.04514" in text


# ------------------------------------------------------------------ one Play for the room

def _canonical(spec: dict) -> dict:
    """A specification with each dataset named by its bytes: two conversions of one chart compare equal whatever
    names their datasets travel under (and whatever ``usermeta`` says of them: Vega-Lite ignores it)."""
    import hashlib

    names = {name: hashlib.md5(data).hexdigest() for name, data in spec["datasets"].items()}
    text = json.dumps({k: v for k, v in spec.items() if k not in ("datasets", "usermeta")}, sort_keys=True)
    for old, new in names.items():
        text = text.replace(json.dumps(old), json.dumps(new))
    return {"spec": json.loads(text), "datasets": sorted(names.values())}


@pytest.mark.parametrize("source,steps", [("permute_hidden", 0), ("permute_hidden", 1), ("permute_hidden", 60),
                                          ("permute_hidden", 61), ("permute_hidden", 300), ("none", 12),
                                          ("bfloat16", 150)])
def test_a_frame_drawn_from_the_rooms_specification_is_the_chart_itself(source, steps):
    """Play's charts are built once per shape and drawn with each step's rows beside them (ui.training_view
    .frame_spec): for every chart, its specification and rows are those st.altair_chart makes of the chart."""
    from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec as to_spec

    import ui.training_view as view

    settings = TrainSettings(source=source, steps=300)
    recs = PairedRun(settings).run(steps)
    df = view.records_frame(recs)
    summary = summarize(recs) if recs else None
    at = ("equivalence test", settings, steps)
    title = "How far apart, for this test"
    gaps = view.gap_tables(df, summary)
    charts = [
        ("loss", (190, False), lambda: (view._few(df), None, view.loss_tables(df)),
         lambda t, few, top: view.loss_layers(t, few, None, 190, x_title=False), view.loss_chart(df, None, 190, False)),
        ("relative gap", 300, lambda: (view._few(df), view.gap_top(df), view.relative_gap_tables(df)),
         lambda t, few, top: view.relative_gap_layers(t, few, top, 300), view.relative_gap_chart(df, 300)),
        ("bits", (), lambda: (len(df) <= view.POINTS_UP_TO, None, view.bits_tables(df)),
         lambda t, few, top: view.bits_layers(t, few), view.bits_strip(df)),
    ]
    if summary is not None:
        charts.append(("log gaps", title, lambda: (view._few(gaps["gaps"]), None, gaps),
                       lambda t, few, top: view.gap_layers(t, few, title), view.gap_chart(df, summary, title)))
    for kind, shape, frame, build, chart in charts:
        fast = view.frame_spec(kind, at, shape, frame, build)
        assert _canonical(fast) == _canonical(to_spec(chart)), kind
        assert all(name.startswith("td-") for name in fast["datasets"]), kind  # one name per table, every frame
    loss = view.frame_spec("loss", at, (190, False), charts[0][2], charts[0][3])
    again = view.frame_spec("loss", ("equivalence test", settings, steps, "again"), (190, False), charts[0][2],
                            charts[0][3])
    drop = ("datasets", "usermeta")  # the rows, and what names them
    assert {k: v for k, v in loss.items() if k not in drop} == {k: v for k, v in again.items() if k not in drop}
    fewer = view.records_frame(recs[:-1])
    other = view.frame_spec("loss", (*at, "one step fewer"), (190, False),
                            lambda: (view._few(fewer), None, view.loss_tables(fewer)), charts[0][3])
    assert (other["usermeta"] != loss["usermeta"]) == bool(steps)  # other rows: the browser lays them out afresh


def test_sessions_of_a_preset_share_its_run_and_a_changed_setting_gets_its_own():
    """Each session of a room trained its own copy of the preset's pair; now they view one run, computed once."""
    one, two = open_link(preset=DEFAULT_PRESET), open_link(preset=DEFAULT_PRESET)
    one.button(key="td_step10").click().run()
    two.button(key="td_step").click().run()
    assert not one.exception and not two.exception
    shared = one.session_state["td_run"].shared
    assert two.session_state["td_run"].shared is shared and shared.computed >= 10  # nothing computed twice
    clean = PairedRun(TrainSettings()).run(10)
    assert one.session_state["td_run"].records == clean and two.session_state["td_run"].records == clean[:1]
    assert any("once for everyone viewing this preset" in c.value for c in one.caption)
    own = open_link(preset=DEFAULT_PRESET, lr="0.3")
    own.button(key="td_step").click().run()
    assert own.session_state["td_run"].shared is not shared and not own.session_state["td_run"].for_room
    assert not any("once for everyone viewing this preset" in c.value for c in own.caption)
