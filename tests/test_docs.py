"""The documentation site builds with warnings as errors (scripts/build_docs.sh; notebooks not executed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
pytest.importorskip("numpydoc")
pytest.importorskip("pydata_sphinx_theme")

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_without_a_warning(tmp_path):
    # A copy of docs/ and notebooks/ so that parallel tests and the user's own build are untouched.
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "build_docs.sh", tmp_path / "scripts")
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("_build", "_notebooks",
                                                                                    "generated"))
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("html"))
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    env.pop("BAYES_LOCO_DOCS_EXECUTE", None)
    run = subprocess.run(["bash", "scripts/build_docs.sh"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    site = tmp_path / "docs" / "_build" / "html"
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert {"index.html", "getting_started.html", "design.html", "results.html",
            "_notebooks/06_your_own_data.html", "api/generated/bayes_loco.fit_prs.html"} <= pages
    api = (site / "api/generated/bayes_loco.fit_prs.html").read_text()
    assert "currentmodule" not in api and "rank" in api  # rendered from the docstring, not left as source
