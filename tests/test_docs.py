"""The documentation site builds with warnings as errors, and its sources stay what a user reads.

The build runs ``scripts/build_docs.sh`` with ``BAYES_LOCO_DOCS_EXECUTE=0``: the tutorials are
rendered as committed, without executing them (``tests/test_notebooks.py`` executes them), so the
site's structure, the reference generated from every docstring and the cross-references are
checked here at the cost of a build without kernels.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SOURCES = [p for p in DOCS.rglob("*.md") if "_build" not in p.parts and "generated" not in p.parts]


def test_no_issue_numbers_in_what_users_read():
    pattern = re.compile(r"issue #?[0-9]+", re.IGNORECASE)
    places = [*SOURCES, ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "bayes_loco").rglob("*.py"),
              *(ROOT / "notebooks").glob("*.ipynb")]
    found = [f"{p.relative_to(ROOT)}:{i}" for p in places
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, f"issue numbers in user-facing text: {found}"


def test_no_page_is_a_log():
    """No page over 1,500 lines, and the results pages hold no dated session headings."""
    long = {p.relative_to(ROOT).as_posix(): n for p in SOURCES
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 1500}
    assert not long, f"pages over 1,500 lines: {long}"
    dated = [f"{p.name}: {line}" for p in (DOCS / "results").glob("*.md")
             for line in p.read_text(encoding="utf-8").splitlines()
             if line.startswith("#") and re.search(r"20\d\d-\d\d-\d\d|session", line)]
    assert not dated, f"dated headings on the results pages: {dated}"


def test_nothing_cites_the_removed_results_log():
    places = [*(ROOT / "bayes_loco").rglob("*.py"), *SOURCES, ROOT / "README.md",
              *(ROOT / "notebooks").glob("*.ipynb")]
    found = [p.relative_to(ROOT).as_posix() for p in places
             if "docs/results.md" in p.read_text(encoding="utf-8")]
    assert not found, f"docs/results.md is now docs/results/*.md: {found}"


def test_no_page_is_ignored_by_git():
    """A page git ignores is on the author's site and missing from every clone (a pattern for a study's
    output folder once hid docs/results/)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    run = subprocess.run(["git", "check-ignore", "--no-index", *map(str, SOURCES)], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 1, f"pages git ignores: {run.stdout.split()}"


def test_no_machine_local_paths_in_what_users_read():
    pattern = re.compile(r"(?<![\w.])/(work|tmp)/")
    places = [*SOURCES, ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md",
              *(ROOT / "notebooks").glob("*.ipynb")]
    found = [f"{p.relative_to(ROOT)}:{i}" for p in places
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, f"paths of one machine in user-facing text: {found}"


def test_the_site_builds_without_a_warning(tmp_path):
    for module in ("sphinx", "myst_nb", "numpydoc", "pydata_sphinx_theme"):
        pytest.importorskip(module)
    # A copy of docs/ and notebooks/ so that parallel tests and the user's own build are untouched.
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "build_docs.sh", tmp_path / "scripts")
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path)
    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns("_build", "generated", "*.ipynb"))
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("html"))
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "BAYES_LOCO_DOCS_EXECUTE": "0"}
    run = subprocess.run(["bash", "scripts/build_docs.sh"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    site = tmp_path / "docs" / "_build" / "html"
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    expected = {"index.html", "design.html", "changelog.html", "tutorials/06_your_own_data.html",
                "howto/own-data.html", "howto/choose-a-set.html", "results/coverage.html",
                "reference/glossary.html", "reference/cli.html",
                "reference/generated/bayes_loco.fit_prs.html",
                "reference/generated/bayes_loco.bayes.Posterior.html",
                "reference/generated/bayes_loco.datasets.write_arena.html"}
    assert expected <= pages, sorted(expected - pages)
    api = (site / "reference/generated/bayes_loco.fit_prs.html").read_text()
    assert "currentmodule" not in api and "rank" in api  # rendered from the docstring, not left as source
    # a result class's page documents its methods, with their parameters
    posterior = (site / "reference/generated/bayes_loco.bayes.Posterior.html").read_text()
    assert 'id="bayes_loco.bayes.Posterior.calibrated_set"' in posterior and "Parameters" in posterior
    # cross-references between pages are links
    index = (site / "index.html").read_text()
    assert 'href="reference/glossary.html"' in index and 'href="results/index.html"' in index
