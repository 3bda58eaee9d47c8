"""Exports carry their settings and provenance; CSV stays readable by pandas."""

from __future__ import annotations

import io
import json

import pandas as pd

from ui.export import as_csv, as_json, provenance


def test_csv_and_json_embed_settings_and_provenance():
    table = pd.DataFrame({"order": ["Sequential", "Pairwise"], "bits": ["0x4479a41d", "0x4479a486"]})
    settings = {"storage": "float32", "n": 1_000_000}
    prov = provenance()
    csv_text = as_csv(table, settings, prov).decode()
    assert "# storage: float32" in csv_text and f"# torch_version: {prov['torch_version']}" in csv_text
    back = pd.read_csv(io.StringIO(csv_text), comment="#")
    assert back.to_dict("records") == table.to_dict("records")
    data = json.loads(as_json(table, settings, prov))
    assert data["settings"] == settings and data["provenance"]["torch_version"] == prov["torch_version"]
    assert data["rows"] == table.to_dict("records")


def test_pages_offer_both_downloads():
    from streamlit.testing.v1 import AppTest

    from tests.pages.conftest import ROOT, TIMEOUT

    at = AppTest.from_file(str(ROOT / "pages" / "summation_lab.py"), default_timeout=TIMEOUT)
    at.query_params.update({"n": "1000", "permutations": "0"})
    at.run()
    assert not at.exception and not at.get("download_button")  # the files are made once their section is open
    at.session_state["sl_downloads"] = True  # what opening "Download the numbers" sets
    at.run()
    assert not at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download the table as CSV" in labels and "Download as JSON (with settings and provenance)" in labels
