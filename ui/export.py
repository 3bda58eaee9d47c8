"""Downloads of result tables as CSV and JSON, with the settings and provenance embedded."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import streamlit as st
import torch

from core.machines.devices import cpu_device, machine_facts
from core.machines.globalstate import PROCESS_THREADS
from ui.crowd import folded


def provenance() -> dict:
    return {
        "computed_on": cpu_device().name,
        "cpu_model": machine_facts()["cpu_model"],
        "cpu_capability": machine_facts()["cpu_capability"],
        "blas": machine_facts()["blas"],
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "torch_threads": PROCESS_THREADS,  # the configured count, not this thread's own
        "exported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def as_csv(table: pd.DataFrame, settings: dict, prov: dict) -> bytes:
    """CSV whose first lines are '# key: value' comments (pandas: read_csv(..., comment='#'))."""
    head = "".join(f"# {k}: {v}\n" for k, v in {**settings, **prov}.items())
    return (head + table.to_csv(index=False)).encode()


def as_json(table: pd.DataFrame, settings: dict, prov: dict) -> bytes:
    return json.dumps({"settings": settings, "provenance": prov, "rows": table.to_dict("records")},
                      indent=1, default=str).encode()


def download_buttons(table: pd.DataFrame, settings: dict, stem: str, key: str) -> None:
    """The table as CSV and as JSON, in a section of their own (``ui.crowd.folded``, open state under
    ``{key}_downloads``): the files are made only once a visitor opens it. Made with every view, they took
    about a fifth of the Summation lab's page run, for each of a room's hundred viewers."""
    with folded("Download the numbers (CSV, JSON with settings and provenance)", f"{key}_downloads",
                ":material/download:") as open_:
        if open_:
            _buttons(table, settings, stem, key)


def _buttons(table: pd.DataFrame, settings: dict, stem: str, key: str) -> None:
    prov = provenance()
    c1, c2 = st.columns(2)
    # The files are made with the section, not on click (Streamlit's deferred data): a deferred file is fetched
    # after the click, and a rerun of a busy session in between cancelled it (ten viewers on two cores).
    # on_click="ignore": a download needs no rerun, and a rerun could retire the file mid-download
    c1.download_button("Download the table as CSV", as_csv(table, settings, prov), f"{stem}.csv", "text/csv",
                       key=f"{key}_csv", on_click="ignore")
    c2.download_button("Download as JSON (with settings and provenance)", as_json(table, settings, prov),
                       f"{stem}.json", "application/json", key=f"{key}_json", on_click="ignore")
