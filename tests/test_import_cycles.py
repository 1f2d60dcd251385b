"""No import circle among the package's modules, type-only imports included.

An import at module level, or under ``if t.TYPE_CHECKING:``, is an edge; an
import inside a function is not (it runs later, on purpose). A circle makes the
modules one unit that can only be understood, tested and changed together.
"""

from __future__ import annotations

import ast
import pathlib

import flask_sqs_jobs

from tests.test_boundaries import module_name
from tests.test_boundaries import ROOT


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If | ast.Try):
            found.extend(
                inner
                for inner in ast.walk(node)
                if isinstance(inner, ast.Import | ast.ImportFrom)
            )
    return found


def _targets(
    importer: str, path: pathlib.Path, node: ast.Import | ast.ImportFrom
) -> list[str]:
    """The modules an import statement loads (a submodule, else its package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = importer.split(".")
        if path.name != "__init__.py":
            package.pop()
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules it imports at module level."""
    paths = {module_name(path): path for path in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in _module_level_imports(ast.parse(path.read_text())):
            targets = _targets(name, path, node)
            *named, base = targets
            submodules = [target for target in named if target in paths]
            # ``from pkg import a, b``: an edge to each submodule named, and to
            # the package itself only when a name is not a submodule.
            loaded = (
                submodules if len(submodules) == len(named) else [*submodules, base]
            )
            graph[name].update(t for t in loaded if t in paths and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_circle() -> None:
    assert circles(import_graph()) == []


def test_a_type_only_circle_is_found() -> None:
    graph = import_graph()
    assert "flask_sqs_jobs._extension" in graph["flask_sqs_jobs"]
    graph["flask_sqs_jobs._tasks"].add("flask_sqs_jobs._extension")
    assert any("flask_sqs_jobs._tasks" in group for group in circles(graph))
    assert flask_sqs_jobs.__name__ == "flask_sqs_jobs"
