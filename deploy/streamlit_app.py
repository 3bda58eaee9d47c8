"""Entry point for Streamlit Community Cloud: the same app as app.py, with the same pages.

Community Cloud looks for a dependency file next to the entrypoint before the one at the repository
root (Streamlit docs, "App dependencies for your Community Cloud app" and "File organization for your
Community Cloud app": https://docs.streamlit.io/deploy/streamlit-community-cloud/deploy-your-app/file-organization),
so this folder's requirements.txt, which names PyTorch's CPU wheel index, is the one the Cloud installs,
while the root requirements.txt stays as the development machines install it.

Streamlit puts this file's folder on ``sys.path``, not the repository root, so the root is added here
before app.py runs; app.py names its pages from the root (ui.navigation.page_file), so they resolve
from this folder too. The Cloud runs every app from the repository root, as `streamlit run
deploy/streamlit_app.py` does locally from a clone, so data/ and .streamlit/config.toml are found.
"""

from __future__ import annotations

import pathlib
import runpy
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
