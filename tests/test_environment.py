"""The locked development environment: requirements/dev.lock covers pyproject.toml and is what runs.

``scripts/bootstrap.sh`` installs with the lock as pip constraints; pyproject.toml keeps ranges. The
lock must pin every requirement of the package and its ``dev`` extra, within those ranges, for the
Python running the tests, and an environment built by the bootstrap has exactly those versions.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "dev.lock"


def _pins() -> dict[str, str]:
    """The lock's pinned version of each package for this Python and platform (markers evaluated)."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        if not line or line.startswith((" ", "#")):
            continue
        spec, _, marker = line.partition(";")
        name, _, version = spec.strip().partition("==")
        assert version, f"requirements/dev.lock: {line!r} is not pinned with =="
        if not marker.strip() or Marker(marker.strip()).evaluate():
            key = canonicalize_name(name)
            assert key not in pins, f"requirements/dev.lock pins {name} twice for this Python"
            pins[key] = version
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]


def test_the_lock_pins_every_requirement_within_its_range():
    pins = _pins()
    for requirement in _requirements():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        key = canonicalize_name(requirement.name)
        assert key in pins, f"{requirement.name} is in pyproject.toml but not in requirements/dev.lock"
        assert requirement.specifier.contains(pins[key], prereleases=True), (
            f"requirements/dev.lock pins {requirement.name}=={pins[key]}, outside pyproject.toml's "
            f"{requirement.specifier}: regenerate the lock (scripts/bootstrap.sh says how)")


def test_the_lock_says_how_to_regenerate_it_and_the_bootstrap_uses_it():
    header = LOCK.read_text().splitlines()[:2]
    assert re.search(r"uv pip compile pyproject\.toml --extra dev --universal", header[1])
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    assert "--constraint requirements/dev.lock" in bootstrap and "--newest" in bootstrap


@pytest.mark.skipif(not (Path(sys.prefix) / ".." / "requirements").resolve().is_dir()
                    or Path(sys.prefix).name != ".venv",
                    reason="runs in the locked environment that scripts/bootstrap.sh builds (.venv)")
def test_the_locked_environment_has_the_locked_versions():
    pins = _pins()
    for key in ("numpy", "scipy", "pandas", "pymc", "pytensor", "nutpie", "numba", "arviz", "xarray"):
        assert importlib.metadata.version(key) == pins[key], (
            f"{key} {importlib.metadata.version(key)} is installed, the lock pins {pins[key]}: "
            "rerun bash scripts/bootstrap.sh")


def test_no_environment_or_link_is_tracked():
    """A committed link (``.venv`` pointing at a local environment) replaces the environment of every
    checkout that merges it: git treats an ignored directory as expendable."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True)
    links = [line.split("\t", 1)[1] for line in listed.stdout.splitlines() if line.startswith("120000")]
    assert not links, f"symbolic links are tracked: {links}"
    tracked = subprocess.run(["git", "ls-files", ".venv", ".venv-newest"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert not tracked, tracked
