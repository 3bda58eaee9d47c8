"""AppTest: the home page tells the story and links to every page that exists."""

from __future__ import annotations

from tests.pages.conftest import all_text


def test_home_renders_the_story(app):
    assert not app.exception
    text = all_text(app)
    for phrase in ("non-associative", "Hardware chooses the order", "Training amplifies",
                   "Takeaway", "float64", "torch.sum(x, dtype=torch.float64)", "aggregate metrics",
                   "1/32 to 1/64"):
        assert phrase in text, phrase


def test_home_links_to_every_page(app):
    labels = [p.proto.label for p in app.get("page_link")]
    assert len(labels) == 4
    assert labels[0].startswith("Non-associativity") and labels[1].startswith("Summation lab")
    assert labels[2].startswith("Training divergence") and labels[3].startswith("Mitigations")


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
    app.switch_page("pages/mitigations.py").run()
    assert not app.exception
    assert app.title[0].value == "Mitigations and what they cost"
