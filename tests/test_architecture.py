"""The layering rules, read from the package's source by ``scripts/import_graph.py``.

Every import of a bayes_loco module counts, at module level or inside a function. The rules:
no import circle (counting imports by name: a registry's strings that a module imports); no
import of another module's private name; no module over 600 lines; no function over 60 lines of
code (docstrings aside); only ``__init__`` imports the package face; ``sets/`` never imports the solver
(``bayes_loco.solvers``, ``bayes_loco.policy``). Each rule is one test whose message lists the
offenders, and each is shown to catch a planted offender in a small package written here.
"""

from __future__ import annotations

import textwrap

import pytest

from scripts import import_graph

SOLVER = ("bayes_loco.solvers", "bayes_loco.policy")




def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# ------------------------------------------------------------------ the rules, as lists of offenders


def circles(rep) -> list[str]:
    return [" <-> ".join(circle) for circle in rep.circles]


def long_modules(rep) -> list[str]:
    return [f"{module}: {lines} lines" for module, lines in sorted(rep.long_modules.items())]


def long_functions(rep) -> list[str]:
    return [f"{module}.{name} (line {line}): {lines} lines"
            for module, found in sorted(rep.long_functions.items()) for name, line, lines in found]


def face_importers(rep) -> list[str]:
    return list(rep.face_importers)


def private_imports(rep) -> list[str]:
    return [f"{module} (line {line}): {name} from {source}"
            for module, found in sorted(rep.private_imports.items()) for source, name, line in found]


def sets_importing_the_solver(rep) -> list[str]:
    return [f"{a} -> {b} (line {', '.join(str(line) for line, _ in uses)})"
            for (a, b), uses in sorted(rep.edges.items())
            if _within(a, "bayes_loco.sets") and any(_within(b, solver) for solver in SOLVER)]


RULES = {"circles": circles, "long_modules": long_modules, "long_functions": long_functions,
         "face_importers": face_importers, "sets_importing_the_solver": sets_importing_the_solver,
         "private_imports": private_imports}


@pytest.fixture(scope="module")
def package():
    return import_graph.report()


def offenders(rule, rep) -> str:
    return "\n  ".join(RULES[rule](rep))


# ------------------------------------------------------------------------------- the package itself


def test_no_import_circle_counting_imports_inside_functions(package):
    assert not package.circles, f"import circles:\n  {offenders('circles', package)}"


def test_no_module_over_600_lines(package):
    assert import_graph.MAX_MODULE_LINES == 600
    assert not package.long_modules, f"modules over 600 lines:\n  {offenders('long_modules', package)}"


def test_no_function_over_60_lines_of_code(package):
    assert import_graph.MAX_FUNCTION_LINES == 60
    assert not package.long_functions, (f"functions over 60 lines of code:\n  "
                                        f"{offenders('long_functions', package)}")


def test_only_init_imports_the_package_face(package):
    assert not package.face_importers, (f"modules importing bayes_loco/__init__:\n  "
                                        f"{offenders('face_importers', package)}")


def test_no_module_imports_a_private_name_of_another(package):
    assert not private_imports(package), (f"imports of a private name from another module:\n  "
                                          f"{offenders('private_imports', package)}")


def test_the_file_registry_loads_its_classes_by_name_without_a_circle(package):
    """The reader imports each registered class by name (an edge the graph counts); the writer that a
    result's ``save`` reaches sits below it, so the posterior and the reader close no circle."""
    assert ("bayes_loco._ioformat", "bayes_loco.bayes.posterior") in package.edges
    assert ("bayes_loco.bayes.posterior", "bayes_loco._iowrite") in package.edges
    assert not any(a == "bayes_loco._iowrite" and b == "bayes_loco._ioformat" for a, b in package.edges)


def test_sets_never_import_the_solver(package):
    assert not sets_importing_the_solver(package), (f"sets/ modules importing the solver:\n  "
                                                    f"{offenders('sets_importing_the_solver', package)}")


def test_the_version_lives_below_the_face():
    from importlib.metadata import version

    import bayes_loco
    from bayes_loco import _ioformat, _iowrite, _version, trees

    assert bayes_loco.__version__ == version("bayes_loco")
    assert _ioformat.__version__ is _iowrite.__version__ is trees.__version__ is bayes_loco.__version__ \
        is _version.__version__


def test_the_script_prints_its_summary(capsys):
    assert import_graph.main([]) == 0
    out = capsys.readouterr().out
    for line in ("modules: ", "depth: ", "circles: ", "modules importing the package face",
                 "modules over 600 lines: ", "functions over 60 lines of code: "):
        assert line in out
    rep = import_graph.report()
    assert f"modules: {len(rep.lines)}, lines: {sum(rep.lines.values())}," in out
    assert f"circles: {len(rep.circles)}\n" in out


# -------------------------------------------------------------- each rule catches a planted offender


def _long_function(lines: int) -> str:
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 1))
    return f'def long():\n    """A docstring does not count."""\n{body}    return 0\n'


PLANTED = {
    # a circle closed by an import inside a function
    "circles": ({"bayes_loco/a.py": "from . import b\n",
                 "bayes_loco/b.py": "def f():\n    from . import a\n    return a\n"},
                ["bayes_loco.a <-> bayes_loco.b"]),
    "long_modules": ({"bayes_loco/big.py": "x = 1\n" * 601}, ["bayes_loco.big: 601 lines"]),
    "long_functions": ({"bayes_loco/f.py": _long_function(61)}, ["bayes_loco.f.long (line 1): 61 lines"]),
    # imports inside functions, as the package's were
    "face_importers": ({"bayes_loco/io.py": "def save():\n    from . import __version__\n    return 0\n"},
                       ["bayes_loco.io"]),
    # a circle closed by a registry string that a module imports by name
    "by_name": ({"bayes_loco/reg.py": "import importlib\nT = {'A': 'bayes_loco.a:A'}\n"
                                      "def load(tag):\n    return importlib.import_module(T[tag])\n",
                 "bayes_loco/a.py": "from . import reg\nclass A:\n    pass\n"},
                ["bayes_loco.a <-> bayes_loco.reg"]),
    "private_imports": ({"bayes_loco/a.py": "_hidden = 1\n",
                         "bayes_loco/b.py": "def f():\n    from .a import _hidden\n    return _hidden\n"},
                        ["bayes_loco.b (line 2): _hidden from bayes_loco.a"]),
    "sets_importing_the_solver": ({"bayes_loco/sets/__init__.py": "", "bayes_loco/policy.py": "g = 1\n",
                                   "bayes_loco/sets/value.py": "def z():\n    from ..policy import g\n"},
                                  ["bayes_loco.sets.value -> bayes_loco.policy (line 2)"]),
}


@pytest.mark.parametrize("rule", sorted(PLANTED))
def test_each_rule_finds_a_planted_offender_and_nothing_else(rule, tmp_path):
    files, expected = PLANTED[rule]
    (tmp_path / "bayes_loco").mkdir()
    (tmp_path / "bayes_loco" / "__init__.py").write_text('"""A package face."""\n__version__ = "0"\n')
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    rep = import_graph.report(tmp_path / "bayes_loco")
    found = "circles" if rule == "by_name" else rule
    assert RULES[found](rep) == expected
    assert not [other for other, check in RULES.items() if other != found and check(rep)]


def test_a_function_of_exactly_60_lines_and_a_module_of_600_pass(tmp_path):
    (tmp_path / "bayes_loco").mkdir()
    (tmp_path / "bayes_loco" / "__init__.py").write_text("")
    text = _long_function(60)
    (tmp_path / "bayes_loco" / "edge.py").write_text(text + "y = 1\n" * (600 - len(text.splitlines())))
    rep = import_graph.report(tmp_path / "bayes_loco")
    assert rep.lines["bayes_loco.edge"] == 600
    assert not long_modules(rep) and not long_functions(rep)
