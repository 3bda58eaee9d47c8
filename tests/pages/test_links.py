"""AppTest: every page restores its settings from a link, and writes them back."""

from __future__ import annotations

from urllib.parse import parse_qs

import numpy as np
from streamlit.testing.v1 import AppTest

from core.arith.loader import MAX_UPLOAD_BYTES
from core.crowd.querystate import LINK_TEXT_CHARS as LINK_PASTE_CHARS
from tests.pages.conftest import all_text, reader


def open_page(name: str, **params) -> AppTest:
    at = reader(name)  # its folded sections open
    at.query_params.update(params)
    return at.run()


def test_summation_lab_from_a_link():
    at = open_page("summation_lab", n="1000", storage="float16", orders="sequential,kahan", permutations="0")
    assert not at.exception
    t = next(df.value for df in at.dataframe if "bits" in df.value.columns)  # the full table, folded
    assert list(t["order"]) == ["Sequential, left to right", "Kahan compensated"]
    assert set(t["bits"].str.len()) == {6}
    assert at.session_state["sl_n"] == 1000
    at.number_input(key="sl_seed").set_value(7).run()
    assert at.query_params["seed"] == "7" and at.query_params["n"] == "1000"


def test_bad_links_fall_back_with_a_note():
    at = open_page("summation_lab", n="ten", storage="float8", junk="1")
    assert not at.exception
    text = all_text(at)
    assert "“n=ten” was ignored" in text and "“storage=float8” was ignored" in text and "Unknown link" in text
    assert at.session_state["sl_n"] == 1_000_000 and at.session_state["sl_storage"] == "float32"


def test_non_associativity_link_and_preset_link():
    at = open_page("non_associativity", format="float16", a="2048", b="1", c="1")
    assert not at.exception and "2048 versus 2050" in at.info[0].value
    at = open_page("non_associativity", preset="256 + 1 + 1 (bfloat16)")
    assert not at.exception and at.session_state["na_fmt"] == "bfloat16" and "256 versus 258" in at.info[0].value


def test_training_cpu_gpu_and_mitigation_links():
    at = open_page("training_divergence", difference="nudge", lr="0.8", steps="40", seed="3")
    assert not at.exception
    s = at.session_state["td_run"].settings
    assert (s.source, s.lr, s.steps, s.seed) == ("nudge", 0.8, 40, 3)
    at = open_page("cpu_vs_gpu", vector="uniform", n="1000", format="float64")
    assert not at.exception and at.session_state["cg_n"] == 1000
    at = open_page("mitigations", storage="bfloat16", seeds="3")
    assert not at.exception and at.session_state["mi_storage"] == "bfloat16"


# ------------------------------------------- long pastes stay out of the link, with a download
MAX_PASTE_CHARS = MAX_UPLOAD_BYTES  # the summation lab's text area limit (max_chars)


def _paste(at: AppTest, text: str) -> AppTest:
    at.selectbox(key="sl_source").select("paste").run()
    return at.text_area(key="sl_paste").set_value(text).run()


def _link(at: AppTest) -> str:
    return next(c.value for c in at.code if c.value.startswith("?"))


def _download_labels(at: AppTest) -> list[str]:
    return [str(getattr(e, "proto", None) and e.proto.label) for e in at.get("download_button")]


def test_a_100000_number_paste_stays_out_of_the_link():
    numbers = ", ".join(repr(float(x)) for x in np.random.default_rng(0).standard_normal(100_000))
    assert len(numbers) > 1_000_000  # a link holding it would be a query of over 1 MB
    at = _paste(open_page("summation_lab"), numbers)
    assert not at.exception, at.exception
    assert at.session_state["sl_last"].values.size == 100_000  # the paste itself is used
    assert "numbers" not in at.query_params and at.query_params["vector"] == "paste"
    link = _link(at)
    assert "numbers=" not in link and len(link) < 1_000, len(link)
    warning = " ".join(w.value for w in at.warning)
    assert "too long for a link" in warning and f"{len(numbers):,} characters" in warning
    assert f"at most {LINK_PASTE_CHARS:,}" in warning
    assert any("Download the pasted numbers" in label for label in _download_labels(at)), _download_labels(at)


def test_a_short_paste_travels_in_the_link_percent_encoded():
    at = _paste(open_page("summation_lab"), "1e8 1 -1e8 0.1+0.2 & #x")
    assert at.query_params["numbers"] == "1e8 1 -1e8 0.1+0.2 & #x"
    link = _link(at)
    assert "numbers=1e8%201%20-1e8%200.1%2B0.2%20%26%20%23x" in link  # +, & and # survive the trip
    assert parse_qs(link[1:])["numbers"] == ["1e8 1 -1e8 0.1+0.2 & #x"]
    assert "too long for a link" not in " ".join(w.value for w in at.warning)


def test_a_paste_at_the_box_limit_gets_a_message_and_stays_out_of_the_link():
    """The browser cuts a longer paste at max_chars; a full box is refused with a message next to it,
    and a bigger value (6 MB: three million "1 ") never reaches the URL either."""
    for text in ("1 " * (MAX_PASTE_CHARS // 2), "1 " * 3_000_000):
        at = _paste(open_page("summation_lab"), text)
        assert not at.exception, at.exception
        assert any("fills the box's limit" in e.value for e in at.error), [e.value for e in at.error]
        assert "numbers" not in at.query_params and len(_link(at)) < 1_000
    assert at.text_area(key="sl_paste").proto.max_chars == MAX_PASTE_CHARS


def test_the_box_limit_fits_the_servers_message_limit():
    """At 4 bytes per character (UTF-8's worst case) a full box still fits one websocket message."""
    from streamlit import config

    assert config.get_option("server.maxMessageSize") * 2**20 > MAX_PASTE_CHARS * 4
    assert MAX_PASTE_CHARS <= MAX_UPLOAD_BYTES


def test_a_link_with_a_too_long_paste_says_so():
    at = open_page("summation_lab", vector="paste", numbers="1 " * LINK_PASTE_CHARS)
    assert not at.exception
    assert "too long for a link" in all_text(at) and at.session_state["sl_paste"] != "1 " * LINK_PASTE_CHARS


def test_a_link_applies_every_time_it_is_opened_and_a_visitors_change_survives_reruns():
    """Scenario links applied only once per page per session."""
    small = {"n": "1000", "storage": "float16", "orders": "sequential,kahan", "permutations": "0"}
    at = open_page("summation_lab", **small)
    assert at.session_state["sl_n"] == 1000 and at.session_state["sl_storage"] == "float16"
    at.number_input(key="sl_seed").set_value(7).run()  # the visitor's own change survives reruns
    at.run()
    assert at.session_state["sl_seed"] == 7 and at.session_state["sl_n"] == 1000
    at.query_params.clear()  # another link to the same page: its settings, the rest back to defaults
    at.query_params.update({"n": "2000", "storage": "float32"})
    at.run()
    assert not at.exception
    assert at.session_state["sl_n"] == 2000 and at.session_state["sl_storage"] == "float32"
    assert at.session_state["sl_seed"] == 0 and at.session_state["sl_k"] == 20
    at.query_params.clear()  # the first link again (a second click, or the back button)
    at.query_params.update(small)
    at.run()
    assert at.session_state["sl_n"] == 1000 and at.session_state["sl_storage"] == "float16"
    assert at.session_state["sl_orders"] == ["sequential", "kahan"] and at.session_state["sl_k"] == 0


def test_the_speakers_sidebar_gives_the_room_this_view_without_presenter_mode():
    """In presenter mode every page but the overview ends its sidebar with the room's link (this page, these
    settings, no ``talk``) and a QR code of it; the overview shows them on the page. Outside presenter mode,
    neither."""
    from core.crowd.querystate import query_string
    from tests.pages.conftest import ROOT, TIMEOUT
    from ui.talk import ROOM_KEY

    link = {"preset": "256 + 1 + 1 (bfloat16)", "format": "bfloat16", "a": "256", "b": "1", "c": "1"}
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.switch_page("pages/non_associativity.py")
    at.query_params.update(link | {"talk": "1"})
    at.run()
    assert not at.exception
    room = [m.value for m in at.sidebar.markdown if m.value.startswith("**For the room:**")]
    assert len(room) == 1 and room[0].endswith(f"`?{query_string(link)}`"), room  # AppTest has no host
    assert len(at.sidebar.get("image")) == 1 and at.main.get("image") == []  # the code, in the sidebar only
    assert ROOM_KEY in str(at.sidebar.get("flex_container")[0].proto)
    plain = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    plain.switch_page("pages/non_associativity.py")
    plain.query_params.update(link)
    plain.run()
    assert not plain.exception and plain.sidebar.get("image") == []
    assert not any(m.value.startswith("**For the room:**") for m in plain.sidebar.markdown)
