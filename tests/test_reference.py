"""The reference documents every public name, and the docstrings say what a user needs.

Read from the sources, without building the site (``tests/test_docs.py`` builds it):

- every name in the ``__all__`` of the public modules has an entry in an ``autosummary`` table
  of ``docs/reference/*.md`` (so a page), under its own name or as the same object under another;
- every public method of the result classes documents its Parameters (when it takes any),
  its Returns and an Example;
- every public function has an Example (``tests/test_doctests.py`` runs them).

``PENDING`` lists the docstrings still without those sections, by the module that holds them; a
name leaves the list when its docstring is complete (the test fails while a listed name is
complete, so the list only shrinks).
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
from numpydoc.docscrape import FunctionDoc

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
MODULES = ("bayes_loco", "bayes_loco.certify", "bayes_loco.bayes", "bayes_loco.sets", "bayes_loco.plots",
           "bayes_loco.datasets", "bayes_loco.experiments", "bayes_loco.experiments.frontier",
           "bayes_loco.experiments.heldout", "bayes_loco.simulate")
# The classes a fit, a set, a policy, a reader or a study returns to the user.
RESULT_CLASSES = (
    "bayes_loco.PreferenceData", "bayes_loco.Population", "bayes_loco.Dataset", "bayes_loco.MLEResult",
    "bayes_loco.BradleyTerryFit", "bayes_loco.LowRankResult", "bayes_loco.PRSResult",
    "bayes_loco.RankSelection", "bayes_loco.Diagnostics", "bayes_loco.Summary", "bayes_loco.RTVBasis",
    "bayes_loco.VecCoordinates", "bayes_loco.EllipsoidSet", "bayes_loco.DrawsSet", "bayes_loco.QuantileSet",
    "bayes_loco.Certificate", "bayes_loco.Policy", "bayes_loco.ValueBound", "bayes_loco.BestActions",
    "bayes_loco.Prediction", "bayes_loco.CrossValidation", "bayes_loco.bayes.Posterior",
    "bayes_loco.bayes.LOOResult", "bayes_loco.bayes.RankComparison", "bayes_loco.datasets.GeneratedArena",
    "bayes_loco.datasets.GeneratedPrism", "bayes_loco.datasets.PersonalLLMProblem",
    "bayes_loco.simulate.PaperProblem",
)
# Docstrings not yet complete, in modules whose code another change owns; each leaves when it is.
PENDING: set[str] = set()


def _entries() -> dict[str, object]:
    """Every name an autosummary table of the reference lists, with the object it names."""
    out = {}
    for page in sorted(REFERENCE.glob("*.md")):
        module = None
        in_table = False
        for line in page.read_text(encoding="utf-8").splitlines():
            if m := re.match(r"\.\. currentmodule:: (\S+)", line.strip()):
                module = m.group(1)
            elif line.strip().startswith(".. autosummary::"):
                in_table = True
            elif in_table and line.startswith("   ") and not line.strip().startswith(":"):
                if line.strip():
                    name = f"{module}.{line.strip()}"
                    out[name] = _resolve(name)
            elif in_table and line.strip() and not line.startswith("   "):
                in_table = False
    return out


def _resolve(name: str):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


ENTRIES = _entries()


def _public(module_name: str) -> list[tuple[str, object]]:
    module = importlib.import_module(module_name)
    return [(f"{module_name}.{n}", getattr(module, n)) for n in module.__all__]


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_name_has_a_reference_page(module_name):
    documented = list(ENTRIES.values())
    missing = [name for name, obj in _public(module_name)
               if name not in ENTRIES and not any(obj is other for other in documented)]
    assert not missing, f"public names without a page in docs/reference/*.md: {missing}"


def test_every_reference_entry_is_public():
    public = {name for module in MODULES for name, _ in _public(module)}
    objects = [obj for module in MODULES for _, obj in _public(module)]
    stray = [name for name, obj in ENTRIES.items()
             if name not in public and not any(obj is o for o in objects)]
    assert not stray, f"reference entries that are not public names: {stray}"


def _qualname(obj, owner=None) -> str:
    base = owner or obj
    return f"{base.__module__}.{obj.__qualname__}"


def _methods(cls):
    """(qualified name, function) of the public methods a user calls on ``cls``, where defined."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
        if owner is None or not owner.__module__.startswith("bayes_loco"):
            continue
        raw = owner.__dict__[name]
        if isinstance(raw, staticmethod | classmethod):
            raw = raw.__func__
        if inspect.isfunction(raw):
            yield f"{owner.__module__}.{owner.__qualname__}.{name}", raw


def _gaps(function, *, need_parameters: bool, need_returns: bool) -> list[str]:
    if not function.__doc__:
        return ["a docstring"]
    doc = FunctionDoc(function)
    takes = [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]
    gaps = []
    if need_parameters and takes and not doc["Parameters"]:
        gaps.append("Parameters")
    if need_returns and not (doc["Returns"] or doc["Yields"]):
        gaps.append("Returns")
    if not doc["Examples"]:
        gaps.append("Examples")
    return gaps


def _result_methods():
    seen = {}
    for path in RESULT_CLASSES:
        for qualname, function in _methods(_resolve(path)):
            seen.setdefault(qualname, function)
    return sorted(seen.items())


def _public_functions():
    seen = {}
    for module in MODULES:
        for _, obj in _public(module):
            if inspect.isfunction(obj) and obj.__module__.startswith("bayes_loco"):
                seen.setdefault(_qualname(obj), obj)
    return sorted(seen.items())


def test_result_methods_document_parameters_returns_and_an_example():
    incomplete = {q: gaps for q, f in _result_methods() if q not in PENDING
                  and (gaps := _gaps(f, need_parameters=True, need_returns=True))}
    assert not incomplete, f"result-class methods lacking sections: {incomplete}"


def test_every_public_function_has_an_example():
    incomplete = {q: gaps for q, f in _public_functions() if q not in PENDING
                  and (gaps := _gaps(f, need_parameters=True, need_returns=False))}
    assert not incomplete, f"public functions lacking sections: {incomplete}"


def test_the_pending_list_only_names_what_is_still_incomplete():
    everything = dict(_result_methods()) | dict(_public_functions())
    unknown = sorted(PENDING - set(everything))
    assert not unknown, f"PENDING names no such function: {unknown}"
    methods = dict(_result_methods())
    done = sorted(q for q in PENDING
                  if not _gaps(everything[q], need_parameters=True, need_returns=q in methods))
    assert not done, f"complete now, remove from PENDING: {done}"
