"""AppTest: the Non-associativity page reacts to every control and handles bad input."""

from __future__ import annotations

import decimal
from fractions import Fraction

from tests.pages.conftest import all_text, reader


def exact_str(x: decimal.Decimal) -> str:
    s = format(x, "f")
    return s.rstrip("0").rstrip(".") if "." in s else s


def test_default_shows_the_classic_float64_difference(na):
    assert not na.exception
    assert na.session_state["na_fmt"] == "float64"
    verdict = na.info[0].value
    assert "0.6000000000000001 versus 0.6" in verdict and "1 representable value apart" in verdict
    assert not na.error  # an expected result is never shown as an error


def test_exact_values_agree_with_independent_decimal_arithmetic(na):
    text = all_text(na)
    ctx = decimal.Context(prec=500)
    a, b, c = (ctx.create_decimal(v) for v in (0.1, 0.2, 0.3))  # exact values of the doubles
    for stored in (a, b, c):
        assert exact_str(stored) in text
    assert exact_str(ctx.add(ctx.add(a, b), c)) in text  # exact sum
    assert exact_str(ctx.add(a, b)) in text  # exact intermediate a + b
    assert exact_str(ctx.add(ctx.add(a, b), c)) in text  # exact sum, all 55 digits
    # the ULP errors shown equal an independent Fraction computation
    exact = Fraction(0.1) + Fraction(0.2) + Fraction(0.3)
    ulp = Fraction(2) ** -53
    left = float((Fraction((0.1 + 0.2) + 0.3) - exact) / ulp)
    right = float((Fraction(0.1 + (0.2 + 0.3)) - exact) / ulp)
    metrics = [m.value for m in na.metric]
    # first the punchline (both results and how far apart), then each grouping's error
    assert metrics == [repr((0.1 + 0.2) + 0.3), repr(0.1 + (0.2 + 0.3)), "1 ULP",
                       f"{left:+.4g} ULP", f"{right:+.4g} ULP"]
    assert "What is a ULP?" in text  # the story's first page defines the term


def test_a_huge_ulp_count_reads_as_the_difference_itself(na):
    """1 and 0 are 1,065,353,216 float32 values apart, and an answer off by 1 read "-8.389e+06 ULP (relati…":
    past a readable count of ULPs, the metrics give the difference and its share of the answer."""
    na.selectbox(key="na_preset").select("1e16 + 1 − 1e16 (float64)").run()
    assert not na.exception
    errors = [m for m in na.metric if m.label == "Error against the exact sum"]
    # both groupings give 0 for an exact sum of 1: off by the whole answer
    assert [m.value for m in errors] == ["-1, -100%"] * 2
    assert all(f"{-(2.0**52):+.4g} ULP (relative error 1)" in m.proto.help for m in errors)
    na.selectbox(key="na_preset").select("1e8 − 1e8 + 1 (float32)").run()
    assert not na.exception
    apart = next(m.value for m in na.metric if m.label == "Apart")
    assert apart == "by 1"  # the groupings give 1 and 0
    assert all(len(m.value) <= 12 for m in na.metric)  # short enough for a metric at 1280 px


def test_preset_loads_format_and_numbers(na):
    na.selectbox(key="na_preset").select("2048 + 1 + 1 (float16)").run()
    assert not na.exception
    assert na.session_state["na_fmt"] == "float16"
    assert [na.text_input(key=k).value for k in ("na_a", "na_b", "na_c")] == ["2048", "1", "1"]
    assert "2048 versus 2050" in na.info[0].value


def test_overflow_preset_explains_infinity(na):
    na.selectbox(key="na_preset").select("60000 + 10000 − 10000 (float16)").run()
    assert not na.exception
    text = all_text(na)
    assert "overflowed to inf" in text and "∞ (overflowed)" in text
    assert "one is not finite" in na.info[0].value


def test_changing_the_format_changes_the_result(na):
    na.selectbox(key="na_fmt").select("float32").run()
    assert not na.exception
    assert na.session_state["na_preset"] == "Custom"
    assert "same float32 bits" in na.info[0].value
    assert "0.100000001490116119384765625" in all_text(na)


def test_typing_a_number_changes_the_result(na):
    na.text_input(key="na_c").set_value("-0.3").run()
    assert not na.exception
    text = all_text(na)
    assert "typed <code" in text and "-0.3" in text
    assert na.session_state["na_preset"] == "Custom"


def _assert_bad_input(na, text, fragment):
    na.text_input(key="na_a").set_value(text).run()
    assert not na.exception
    assert any(fragment in e.value for e in na.error), [e.value for e in na.error]
    warning = " ".join(w.value for w in na.warning)
    assert "last valid numbers: 0.1, 0.2, 0.3" in warning
    # the last good result is still on the page
    assert any("0.6000000000000001 versus 0.6" in e.value for e in na.info)


def test_empty_input_keeps_last_result(na):
    _assert_bad_input(na, "", "Enter a number")


def test_text_input_keeps_last_result(na):
    _assert_bad_input(na, "zero point one", "is not a number")


def test_nan_and_inf_are_refused(na):
    _assert_bad_input(na, "NaN", "NaN")
    _assert_bad_input(na, "-inf", "Infinity")


def test_overflow_for_the_format_is_refused(na):
    na.selectbox(key="na_fmt").select("float16").run()
    _assert_bad_input_after = na.text_input(key="na_a").set_value("1e5").run()
    assert not _assert_bad_input_after.exception
    assert any("overflows float16" in e.value and "65500" in e.value for e in na.error)
    assert "last valid numbers: 0.1, 0.2, 0.3 in float16" in " ".join(w.value for w in na.warning)


def test_recovering_from_bad_input(na):
    na.text_input(key="na_a").set_value("oops").run()
    na.text_input(key="na_a").set_value("1/3").run()
    assert not na.exception
    assert not na.warning
    assert "typed <code" in all_text(na) and "1/3" in all_text(na)


def test_search_finds_a_counterexample_and_loads_it(na):
    na.selectbox(key="na_fmt").select("float32").run()
    na.number_input(key="na_n").set_value(5000)  # form values travel with the submit
    na.button[0].click().run()
    assert not na.exception
    text = all_text(na)
    assert "of 5,000 float32 triples" in text and "give different bits" in text
    result = na.session_state["na_search"]
    assert result.example is not None
    na.button(key="na_load_example").click().run()
    assert not na.exception
    assert tuple(na.text_input(key=k).value for k in ("na_a", "na_b", "na_c")) == result.example
    assert na.info and "The groupings differ in float32" in na.info[0].value
    # loading is confirmed beside the button: the playground's result is at the top of the page
    assert any(s.value.startswith("Loaded. At the top of the page now: The groupings differ") for s in na.success)


def test_search_distribution_and_seed_change_the_result(na):
    na.number_input(key="na_n").set_value(2000)
    na.button[0].click().run()
    first = na.session_state["na_search"]
    na.selectbox(key="na_dist").select("wide")
    na.number_input(key="na_seed").set_value(9)
    na.button[0].click().run()
    second = na.session_state["na_search"]
    assert (second.settings.distribution, second.settings.seed) == ("wide", 9)
    assert second.n_differ != first.n_differ or second.example != first.example


def test_a_stored_value_is_shown_exactly_before_its_shortest_decimal(na):
    """In bfloat16, 1e8 read "stored 100000000" next to "exactly 100139008"."""
    na.selectbox(key="na_fmt").select("bfloat16").run()
    na.text_input(key="na_a").set_value("1e8").run()
    assert not na.exception
    text = all_text(na)
    assert "100139008</code> exactly" in text  # the bfloat16 value nearest 1e8 (8 significant bits)
    assert "shortest decimal that reads back to it" in text


def test_presenter_mode_folds_the_settings_and_keeps_the_results():
    """In presenter mode the page stays within three screens at 1280x720: the preset, format and numbers fold into
    one section (with the link to the view), the metrics say the verdict; the results are the same."""

    from tests.pages.conftest import TIMEOUT

    at = reader("non_associativity", TIMEOUT)
    at.session_state["presenter"] = True
    at.run()
    assert not at.exception
    settings = [e for e in at.expander if e.label == "Settings: preset, format and the three numbers"]
    assert len(settings) == 1 and settings[0].selectbox(key="na_preset").value == "0.1 + 0.2 + 0.3 (float64)"
    assert {m.label: m.value for m in at.metric}["Apart"] == "1 ULP"
    assert not at.info and not at.error


def test_a_view_with_its_sections_closed_makes_none_of_them():
    """A room opening the link pays for the first screen: the bits, the exact answer, the devices' table and the
    search are made only once a visitor opens their section, and then they are there."""
    from streamlit.testing.v1 import AppTest

    from tests.pages.conftest import FOLDED_KEYS, ROOT, TIMEOUT

    at = AppTest.from_file(str(ROOT / "pages" / "non_associativity.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    labels = [e.label for e in at.expander]
    assert {"What the format actually stores: each number's bits", "The same additions on each device here",
            "Find a counterexample: random triples, both groupings"} <= set(labels)
    assert not at.dataframe and not at.button and "Correctly rounded" not in all_text(at)
    at.session_state["na_open_devices"] = True
    at.session_state["na_open_exact"] = True
    at.run()
    assert len(at.dataframe) == 1 and "Correctly rounded" in all_text(at)
    assert {e.label for e in at.expander} == set(labels) and len(FOLDED_KEYS["non_associativity"]) == 4


def test_the_learners_first_question_is_asked_and_answered_at_the_defaults(na):
    """"Is float32 different on a GPU?" is a learner's question whatever the preset's format (float64 here)."""
    text = all_text(na)
    assert "**Is float32 (or float64) different on a GPU?** No: the same IEEE 754 format" in text


def test_the_eight_bit_formats_add_both_ways_with_their_own_rules(na):
    """float8_e5m2 gives the groupings different bits for 0.1, 0.2, 0.3; float8_e4m3fn saturates past 448
    (torch's cast), with the source of that rule named."""
    na.selectbox(key="na_fmt").select("float8_e5m2").run()
    assert not na.exception
    assert any("The groupings differ in float8_e5m2: 0.5 versus 0.6" in e.value for e in na.info)
    na.selectbox(key="na_fmt").select("float8_e4m3fn").run()
    for key, text in (("na_a", "300"), ("na_b", "300"), ("na_c", "-300")):
        na.text_input(key=key).set_value(text).run()
    assert not na.exception
    text = all_text(na)
    assert "saturates to ±448" in text and "pytorch/pull/178817" in text and "ml_dtypes/issues/400" in text
    # 300 is stored as 288: (288 + 288) saturates to 448, then 448 - 288 = 160; 288 + (288 - 288) = 288,
    # whose shortest decimal is 300
    verdict = " ".join(e.value for e in na.info)
    assert "160 versus 300" in verdict, verdict


def test_an_eight_bit_format_opens_from_the_address():
    at = reader("non_associativity")
    at.query_params["format"] = "float8_e4m3fn"
    at.run()
    assert not at.exception and at.session_state["na_fmt"] == "float8_e4m3fn"
