"""The documents cannot drift from the code: every page, script, benchmark and core package is named
where it is described, every link between the documents resolves, and the README stays short."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

from ui.navigation import PAGE_TABLE

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
CORE_MODULE_MAX_LINES = 500  # past this a module usually holds two concerns (docs/architecture.md)
CORE_FUNCTION_MAX_LINES = 60  # from its def line to its last: past this a function does several things


def _text(path: pathlib.Path) -> str:
    return path.read_text(encoding="utf-8")


def test_the_readme_reads_in_five_minutes():
    lines = _text(README).splitlines()
    assert len(lines) <= 100, f"README.md has {len(lines)} lines; the detail belongs in docs/"
    text = "\n".join(lines)
    assert "make run" in text and "make test" in text and "make test-fast" in text


def test_the_readme_names_every_page_once_in_the_sidebars_order():
    bullets = re.findall(r"^- \*\*(.+?)\*\*:", _text(README), flags=re.M)
    assert bullets == ["Overview"] + [title for _, title, *_ in PAGE_TABLE]


def test_pages_md_describes_every_page():
    text = _text(ROOT / "docs" / "pages.md")
    missing = [title for _, title, *_ in PAGE_TABLE if f"**{title}**" not in text]
    assert not missing


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    targets = [t.split("#", 1)[0] for t in LINK.findall(_text(doc)) if not re.match(r"[a-z]+:", t)]
    missing = [t for t in targets if t and not (doc.parent / t).exists()]
    assert not missing, f"{doc.name} links to missing files: {missing}"


def test_every_document_in_docs_is_linked_from_the_readme():
    linked = {pathlib.Path(t).name for t in LINK.findall(_text(README))}
    assert {d.name for d in DOCS} <= linked


def test_architecture_names_every_script_and_core_package():
    text = _text(ROOT / "docs" / "architecture.md")
    scripts = [p.name for p in (ROOT / "scripts").glob("*.py") if p.name != "__init__.py"]
    packages = [p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").exists()]
    assert scripts and packages
    assert [s for s in scripts if s not in text] == []
    assert [p for p in packages if f"{p}/" not in text] == []


def test_benchmarks_md_names_every_benchmark():
    text = _text(ROOT / "docs" / "benchmarks.md")
    benches = [p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")]
    assert benches and [b for b in benches if f"benchmarks.{b}" not in text] == []


def test_no_core_module_is_over_the_documented_size():
    sizes = {str(p.relative_to(ROOT)): len(_text(p).splitlines()) for p in (ROOT / "core").rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > CORE_MODULE_MAX_LINES} == {}
    assert [p.name for p in (ROOT / "core").glob("*.py")] == ["__init__.py"]


def test_no_core_function_is_over_the_documented_size():
    long = {}
    for p in (ROOT / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(_text(p))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = node.end_lineno - node.lineno + 1
                if size > CORE_FUNCTION_MAX_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.lineno} {node.name}"] = size
    assert long == {}


def _modules(package: pathlib.Path) -> list[str]:
    return sorted(p.stem for p in package.glob("*.py") if p.name != "__init__.py")


def _architecture_block(text: str, package: str) -> str:
    """The lines of architecture.md's package diagram that describe ``package`` (up to the next package)."""
    diagram = text.split("### core, package by package", 1)[1].split("```", 2)[1]
    names = re.findall(r"^\s*(?:\| )?([a-z_]+)/", diagram, flags=re.M)
    start = diagram.index(f"{package}/")
    later = [diagram.index(f"{n}/") for n in names if diagram.index(f"{n}/") > start]
    return diagram[start:min(later, default=len(diagram))]


@pytest.mark.parametrize("package", sorted(p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").exists()))
def test_every_core_module_is_named_where_its_package_is_described(package):
    """Each module of a core package is named in the package's docstring and in its entry of the
    architecture's package diagram, so neither list can fall behind the files."""
    import importlib

    mods = _modules(ROOT / "core" / package)
    doc = importlib.import_module(f"core.{package}").__doc__ or ""
    block = _architecture_block(_text(ROOT / "docs" / "architecture.md"), package)
    word = lambda m, text: re.search(rf"(?<![\w.]){m}(?!\w)", text) is not None  # noqa: E731
    assert [m for m in mods if not word(m, doc)] == [], f"core/{package}/__init__.py"
    assert [m for m in mods if not word(m, block)] == [], "docs/architecture.md"


def test_the_fingerprints_operation_count_is_the_one_the_docs_state():
    from core.recordings.fingerprint import OPS

    for doc in ("architecture.md", "portability.md"):
        counts = {int(n) for n in re.findall(r"(\d+) operations", _text(ROOT / "docs" / doc))}
        assert counts == {len(OPS)}, doc
