"""The manual builds with `mkdocs build --strict`, offline, with the generated pages in it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                            "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def test_site_builds_strict_with_every_page(site):
    for page in (ROOT / "docs").rglob("*.md"):
        name = page.relative_to(ROOT / "docs").with_suffix("").as_posix()
        built = site / f"{name}.html"
        assert built.exists(), f"docs/{page.name} was not built"


def test_generated_reference_pages_are_in_the_site(site):
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "neuron-check ops" in cli and "--sim-profile" in cli and "neuron-check claims export" in cli
    rules = (site / "reference" / "rules.html").read_text(encoding="utf-8")
    assert "NC105" in rules and "NC912" in rules
    statuses = (site / "reference" / "statuses.html").read_text(encoding="utf-8")
    assert "REF_ERROR" in statuses and "CompileRejected" in statuses


def test_site_fetches_nothing_from_the_network(site):
    """No web fonts or scripts from a CDN: the site works offline (links out are fine)."""
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        remote = re.findall(r"<(?:link|script)[^>]+(?:href|src)=\"(https?://[^\"]+)\"", text)
        assert not remote, f"{html.relative_to(site)} loads {remote}"


def test_build_leaves_the_repository_clean(site):
    assert not (ROOT / "site").exists() or (ROOT / "site").is_dir() and not any((ROOT / "site").iterdir())


def test_readme_is_a_short_front_page_with_the_two_setup_commands():
    """At most 250 lines, and the two commands .ci/run runs, exactly as it runs them."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in ('python -m pip install torch==2.13.0 -e ".[all]"', "python -m pytest"):
        assert f"\n{command}\n" in readme and f"\n{command}\n" in ci, command


# A path into the repository's packages, as the pages name them (`conformance/engine/lifeline.py`).
_REPO_PATH = re.compile(r"\b(?:benchmarks|conformance|op_db|porting_cli|reports|tests|examples)/[\w./-]*\w")


def test_docs_name_only_files_that_exist():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    missing = sorted({(page.name, path) for page in pages
                      for path in _REPO_PATH.findall(page.read_text(encoding="utf-8"))
                      if not (ROOT / path).exists()})
    assert not missing, f"pages name files that do not exist: {missing}"


def test_readme_links_into_docs_resolve():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]*)", readme)
    assert links and all((ROOT / link).exists() for link in links), [l for l in links if not (ROOT / l).exists()]
