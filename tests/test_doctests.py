"""The docstrings' examples run, and print what they show (doctest).

The examples of the reference assume the small problem the reference's index states
(``docs/reference/index.md``): ``np``, ``bl``, ``problem``, ``data`` (300 comparisons), ``pop``
(50 units) and ``fit`` (PRS at rank 2), and on the Bayesian pages ``post`` (a MAP fit with Laplace
draws, made once per process: about 15 s, most of it PyTensor's compilation). Each module's
examples run in a fresh temporary folder, so files they write go there.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest

import bayes_loco as bl

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> list[str]:
    names = ["bayes_loco"]
    for info in pkgutil.walk_packages([str(ROOT / "bayes_loco")], prefix="bayes_loco."):
        names.append(info.name)
    found = []
    for name in sorted(names):
        if name.endswith("__main__"):
            continue
        path = ROOT / (name.replace(".", "/") + ".py")
        path = path if path.exists() else ROOT / name.replace(".", "/") / "__init__.py"
        if ">>>" in path.read_text(encoding="utf-8"):
            found.append(name)
    return found


MODULES = _modules()


@pytest.fixture(scope="session")
def shared():
    problem = bl.simulate.paper_problem(d_s=4, d_a=4, d_x=3, rank=2, imbalance=3, seed=0)
    data = problem.sample(300, seed=1)
    pop = problem.population(50, seed=2)
    fit = bl.fit_prs(data, rank=2, ridge=1.0)
    return {"np": np, "bl": bl, "problem": problem, "data": data, "pop": pop, "fit": fit}


@pytest.fixture(scope="session")
def posterior(shared):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bl.bayes.fit_posterior(shared["data"], rank=2, method="map", random_seed=0)


def test_the_examples_are_found():
    assert {"bayes_loco.policy", "bayes_loco.evaluate", "bayes_loco.bayes.posterior"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_of_a_module_run(name, shared, request, tmp_path, monkeypatch):
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder(exclude_empty=True).find(module, name) if t.examples]
    # only the docstrings defined in this module (a package re-exports its modules' objects)
    tests = [t for t in tests if t.filename and Path(t.filename).resolve() == Path(module.__file__).resolve()]
    if not tests:
        pytest.skip(f"{name}: no examples of its own")
    globs = dict(shared)
    if any(re.search(r"\bpost\b", ex.source) for t in tests for ex in t.examples):
        globs["post"] = request.getfixturevalue("posterior")
    monkeypatch.chdir(tmp_path)
    for name_ in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(name_, "1")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for test in tests:
            test.globs = dict(globs)
            runner.run(test, out=report.append)
    import matplotlib.pyplot as plt

    plt.close("all")
    assert runner.failures == 0, "".join(report)
