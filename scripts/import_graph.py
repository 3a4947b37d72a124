"""The package's import graph: modules, lines, depth, circles, private imports, and the layering rules.

Every ``import``/``from … import`` of a bayes_loco module counts, at module level or inside a
function (an import hidden in a function still ties the two modules together), and so does an import
by name: ``import_module`` of a registry's ``"bayes_loco.x:Name"`` strings. A package's ``__init__``
counts as the module of that name. The depth is the longest chain of imports after each circle is
collapsed to one node; the package face is ``bayes_loco/__init__.py``.

    .venv/bin/python scripts/import_graph.py            # the summary
    .venv/bin/python scripts/import_graph.py --edges    # and every edge (importer -> imported)
    .venv/bin/python scripts/import_graph.py --json out.json

``tests/test_architecture.py`` checks the same rules with :func:`report`.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "bayes_loco"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def module_name(path: Path, root: Path = ROOT) -> str:
    """``bayes_loco.sets.ellipsoid`` for ``bayes_loco/sets/ellipsoid.py``; a package for its ``__init__``."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a relative ``from`` import names."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    # In a package's __init__, ``.`` is the package itself; in a module, its parent.
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking(node: ast.AST) -> bool:
    """True for ``if TYPE_CHECKING:`` (its imports never run)."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (getattr(test, "id", None) == "TYPE_CHECKING"
                                         or getattr(test, "attr", None) == "TYPE_CHECKING")


def _import_module(node: ast.AST) -> ast.expr | None:
    """The argument of an ``import_module(...)`` call, else None."""
    if isinstance(node, ast.Call) and node.args and \
            getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module":
        return node.args[0]
    return None


def registry_names(path: Path) -> set[str]:
    """The modules that ``"bayes_loco.x:Name"`` strings in ``path`` name (a registry of classes by location).

    A dict's key is a name looked up, never imported (a format-1 file's old class name): it does not count.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict)
            for k in node.keys if k is not None}
    return {node.value.partition(":")[0] for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in keys
            and node.value.startswith(PACKAGE + ".") and ":" in node.value and " " not in node.value}


def private_imports(path: Path, root: Path = ROOT) -> list[tuple[str, str, int]]:
    """(module, private name, line) for each ``from <package module> import _name`` in ``path``.

    A private name (one leading underscore) is its module's own business; a name another module needs
    is public in its module. Private *modules* (``_validation``) may be imported: their names are public.
    """
    importer = module_name(path, root)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(importer, is_package, node)
            if base.split(".")[0] != PACKAGE:
                continue
            found += [(base, alias.name, node.lineno) for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def imports(path: Path, modules: set[str], root: Path = ROOT) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, at module level) for each import of a package module in ``path``.

    Imports under ``if TYPE_CHECKING:`` are left out: they never run. ``import_module("bayes_loco.x")``
    counts as an import of x; a call of ``import_module`` on a computed name is given as ``("*", line,
    at module level)``: :func:`report` ties it to the registry strings the module reads.
    """
    importer = module_name(path, root)
    is_package = path.name == "__init__.py"
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(importer, is_package, child)
                # ``from . import x`` imports the submodule x where one exists, else a name of the package.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in child.names]
            elif (arg := _import_module(child)) is not None:
                literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                if literal and not arg.value.startswith(PACKAGE):
                    continue
                found.append((arg.value if literal else "*", child.lineno, not in_function))
                continue
            else:
                scope = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                visit(child, in_function or scope)
                continue
            for target in targets:
                if target == "*":
                    found.append((target, child.lineno, not in_function))
                    continue
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != importer:
                    found.append((target, child.lineno, not in_function))

    visit(ast.parse(path.read_text(), filename=str(path)), False)
    yield from dict.fromkeys(found)


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """(qualified name, first line, lines of code) of each function longer than ``limit``, docstring aside."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                body = child.body
                if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                                        ast.Constant):
                    body = body[1:]
                first = min((n.lineno for n in body), default=child.lineno)
                lines = child.end_lineno - first + 1 if body else 0
                if lines > limit:
                    found.append((f"{prefix}{child.name}", child.lineno, lines))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


@dataclass
class Report:
    """What :func:`report` found."""

    lines: dict[str, int]
    edges: dict[tuple[str, str], list[tuple[int, bool]]]
    circles: list[list[str]]
    depth: int
    longest_chain: list[str]
    face_importers: list[str]
    long_modules: dict[str, int]
    long_functions: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    private_imports: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)

    def summary(self) -> str:
        inside = sum(1 for uses in self.edges.values() if not any(top for _, top in uses))
        out = [f"modules: {len(self.lines)}, lines: {sum(self.lines.values())}, "
               f"import edges: {len(self.edges)} ({inside} only inside functions)",
               f"depth: {self.depth} ({' -> '.join(self.longest_chain)})",
               f"circles: {len(self.circles)}"]
        out += [f"  {' <-> '.join(c)}" for c in self.circles]
        out.append(f"modules importing the package face ({PACKAGE}/__init__): {len(self.face_importers)}")
        out += [f"  {m}" for m in self.face_importers]
        out.append(f"modules over {MAX_MODULE_LINES} lines: {len(self.long_modules)}")
        out += [f"  {m}: {n}" for m, n in sorted(self.long_modules.items(), key=lambda kv: -kv[1])]
        count = sum(len(v) for v in self.long_functions.values())
        out.append(f"functions over {MAX_FUNCTION_LINES} lines of code: {count}")
        for module, funcs in sorted(self.long_functions.items()):
            out += [f"  {module}.{name} (line {line}): {n}" for name, line, n in funcs]
        count = sum(len(v) for v in self.private_imports.values())
        out.append(f"imports of a private name from another module: {count}")
        for module, found in sorted(self.private_imports.items()):
            out += [f"  {module} (line {line}): {name} from {source}" for source, name, line in found]
        return "\n".join(out)


def _circles(nodes: list[str], graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(nodes)))
    try:
        for v in nodes:
            if v not in index:
                connect(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def _longest_chain(nodes: list[str], graph: dict[str, set[str]], circles: list[list[str]]) -> list[str]:
    """The longest import chain after each circle is collapsed to one node (named by its first module)."""
    rep = {m: c[0] for c in circles for m in c}
    dag = {rep.get(v, v): set() for v in nodes}
    for v in nodes:
        dag[rep.get(v, v)] |= {rep.get(w, w) for w in graph[v]} - {rep.get(v, v)}
    best: dict[str, list[str]] = {}

    def chain(v: str) -> list[str]:
        if v not in best:
            best[v] = [v, *max((chain(w) for w in dag[v]), key=len, default=[])]
        return best[v]

    return max((chain(v) for v in dag), key=len, default=[])


def report(root: Path = ROOT) -> Report:
    """The import graph of the package under ``root`` and the layering facts the architecture tests check."""
    paths = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    modules = {module_name(p, root): p for p in paths}
    names = set(modules)
    lines = {m: len(p.read_text().splitlines()) for m, p in modules.items()}
    edges: dict[tuple[str, str], list[tuple[int, bool]]] = {}
    computed: dict[str, list[tuple[int, bool]]] = {}
    for m, p in modules.items():
        for target, line, top in imports(p, names, root):
            if target == "*":
                computed.setdefault(m, []).append((line, top))
            else:
                edges.setdefault((m, target), []).append((line, top))
    # A module that imports a computed name imports, by name, each module that the registry strings it
    # holds or imports from another module name: bayes_loco._ioformat's load of a registered class.
    registries = {m: registry_names(p) for m, p in modules.items()}
    for m, uses in computed.items():
        read = registries[m].union(*(registries[b] for a, b in list(edges) if a == m))
        for target in read:
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and target != m:
                edges.setdefault((m, target), []).extend(uses)
    graph = {m: set() for m in modules}
    for a, b in edges:
        graph[a].add(b)
    nodes = sorted(modules)
    circles = _circles(nodes, graph)
    chain = _longest_chain(nodes, graph, circles)
    face = PACKAGE
    face_importers = sorted(a for a, b in edges if b == face and a != face)
    long_modules = {m: n for m, n in lines.items() if n > MAX_MODULE_LINES}
    funcs = {m: f for m, p in modules.items() if (f := long_functions(p))}
    private = {m: f for m, p in modules.items() if (f := private_imports(p, root))}
    return Report(lines, edges, circles, len(chain), chain, face_importers, long_modules, funcs, private)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="also list every edge")
    parser.add_argument("--json", type=Path, help="write the report as JSON here")
    args = parser.parse_args(argv)
    rep = report()
    print(rep.summary())
    if args.edges:
        for (a, b), uses in sorted(rep.edges.items()):
            where = ", ".join(f"{line}{'' if top else ' (in a function)'}" for line, top in uses)
            print(f"{a} -> {b}: line {where}")
    if args.json:
        args.json.write_text(json.dumps({
            "lines": rep.lines, "depth": rep.depth, "longest_chain": rep.longest_chain,
            "circles": rep.circles, "face_importers": rep.face_importers, "long_modules": rep.long_modules,
            "long_functions": rep.long_functions,
            "edges": [[a, b, [line for line, _ in uses]] for (a, b), uses in sorted(rep.edges.items())],
        }, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
