"""The Community Cloud entrypoint's dependency file: exactly the root's pins, plus PyTorch's CPU index.

Community Cloud reads the dependency file next to the entrypoint before the one at the repository
root (https://docs.streamlit.io/deploy/streamlit-community-cloud/deploy-your-app/app-dependencies),
so deploy/requirements.txt is what the Cloud installs for deploy/streamlit_app.py; if its pins
drifted from requirements.txt, the deployed app would run other versions than the tested one.
"""

from __future__ import annotations

import pathlib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _parse(path: pathlib.Path) -> tuple[dict[str, str], list[str]]:
    """Requirement name -> its exact specifier, and the option lines (``--...``), of a requirements file."""
    pins, options = {}, []
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
            continue
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name not in pins, f"{path.name}: {req.name} twice"
        (spec,) = req.specifier  # one exact pin per package
        assert spec.operator == "==" and not req.marker and not req.url, f"{path.name}: {line} is no exact pin"
        pins[name] = spec.version
    return pins, options


def test_deploy_requirements_pin_exactly_the_root_versions():
    root, root_options = _parse(ROOT / "requirements.txt")
    deploy, deploy_options = _parse(ROOT / "deploy" / "requirements.txt")
    assert root and deploy == root
    assert root_options == []  # the root file stays installable where PyTorch's index cannot be reached
    assert deploy_options == [f"--extra-index-url {CPU_INDEX}"]


def test_the_entrypoint_sits_beside_its_requirements_and_the_config_stays_at_the_root():
    """The Cloud's layout rules: the dependency file in the entrypoint's folder; .streamlit/config.toml at the
    repository root whatever the entrypoint's folder (the same page of Streamlit's docs)."""
    assert (ROOT / "deploy" / "streamlit_app.py").is_file() and (ROOT / "deploy" / "requirements.txt").is_file()
    assert (ROOT / ".streamlit" / "config.toml").is_file() and not (ROOT / "deploy" / ".streamlit").exists()
    # no other dependency file in deploy/ would take precedence over requirements.txt there
    for name in ("uv.lock", "Pipfile", "environment.yml", "pyproject.toml"):
        assert not (ROOT / "deploy" / name).exists(), name


def test_the_docker_image_is_unaffected():
    """The Dockerfile installs the root requirements and serves app.py (through scripts.serve, which runs
    ``streamlit run app.py`` with the warm-up), as before the Cloud entrypoint."""
    text = (ROOT / "Dockerfile").read_text()
    assert "COPY requirements.txt ." in text and "-r requirements.txt" in text and "deploy/" not in text
    assert 'ENTRYPOINT ["python", "-m", "scripts.serve", "--server.port=8501"' in text
    assert '"run", "app.py"' in (ROOT / "scripts" / "serve.py").read_text()
    torch_pin = _parse(ROOT / "requirements.txt")[0]["torch"]
    assert f"--index-url {CPU_INDEX} torch=={torch_pin}" in text
