"""The package's inside is declared: each package says what the others may use.

Every folder of :mod:`flask_sqs_jobs` is a package whose ``__init__`` lists in
``__all__`` what the rest of the project may import from it. A module may
import anything of its own package; from any other package it imports only
names of that package's ``__all__``, through the package itself, never from
one of its private (``_name``) modules.
"""

from __future__ import annotations

import ast
import pathlib

import flask_sqs_jobs
import pytest

ROOT = pathlib.Path(flask_sqs_jobs.__file__).parent


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(module: str) -> str:
    path = ROOT.parent / module.replace(".", "/")
    return module if path.is_dir() else module.rpartition(".")[0]


def is_package(module: str) -> bool:
    return (ROOT.parent / module.replace(".", "/") / "__init__.py").exists()


def declared(package: str) -> set[str]:
    """The names of ``package``'s ``__all__``."""
    init = ROOT.parent / package.replace(".", "/") / "__init__.py"
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__"
            for target in node.targets
        ):
            assert isinstance(node.value, ast.List | ast.Tuple)
            return {_string(element) for element in node.value.elts}
    return set()


def _string(node: ast.expr) -> str:
    assert isinstance(node, ast.Constant)
    assert isinstance(node.value, str)
    return node.value


def imports() -> list[tuple[str, str, list[str], int]]:
    """Every import of the package: (importer, module, names, line).

    A subpackage imported under a name (``from .. import model as r``) also
    counts each attribute the importer reads from it (``r.JobRecord``).
    """
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = module_name(path)
        package = package_of(module)
        tree = ast.parse(path.read_text())
        found.extend(_attribute_uses(module, package, tree))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("flask_sqs_jobs."):
                        found.append((module, alias.name, [], node.lineno))
                continue
            else:
                continue
            if target == "flask_sqs_jobs" or target.startswith("flask_sqs_jobs."):
                found.append((module, target, names, node.lineno))
    return found


def _attribute_uses(
    module: str, package: str, tree: ast.Module
) -> list[tuple[str, str, list[str], int]]:
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                if is_package(f"{target}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{target}.{alias.name}"
    return [
        (module, aliases[node.value.id], [node.attr], node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in aliases
    ]


def crossings() -> set[tuple[str, str]]:
    """(importer, target) pairs that reach past another package's ``__all__``."""
    crossed: set[tuple[str, str]] = set()
    for importer, target, names, _ in imports():
        crossed |= crossed_by(importer, target, names)
    return crossed


def crossed_by(importer: str, target: str, names: list[str]) -> set[tuple[str, str]]:
    """What one import of ``names`` from ``target`` reaches that it may not."""
    own = package_of(importer)
    if not is_package(target):
        return set() if package_of(target) == own else {(importer, target)}
    if target == own:
        return set()
    crossed = set()
    for name in names:
        submodule = f"{target}.{name}"
        if is_package(submodule) or (
            not name.startswith("_")
            and (ROOT.parent / (submodule.replace(".", "/") + ".py")).exists()
        ):
            continue  # a public subpackage or module
        if name not in declared(target):
            crossed.add((importer, f"{target}:{name}"))
    return crossed


def test_no_package_reaches_into_another() -> None:
    unexpected = sorted(crossings())
    assert unexpected == [], "\n".join(f"{a} imports {b}" for a, b in unexpected)


SLOTS = "flask_sqs_jobs.engine.worker._slots"


@pytest.mark.parametrize(
    ("target", "names", "crossed"),
    [
        ("flask_sqs_jobs.engine.sqs._queue", ["SqsQueue"], True),
        ("flask_sqs_jobs.engine.sqs", ["SqsQueue"], False),
        ("flask_sqs_jobs.engine.sqs", ["_queue"], True),
        ("flask_sqs_jobs.engine.sqs", ["not_declared_anywhere"], True),
        ("flask_sqs_jobs.engine.worker._heartbeat", ["Heartbeat"], False),
        ("flask_sqs_jobs", ["signals"], False),
    ],
)
def test_the_rule(target: str, names: list[str], crossed: bool) -> None:
    assert bool(crossed_by(SLOTS, target, names)) is crossed


@pytest.mark.parametrize(
    "package",
    sorted(
        module_name(p.parent)
        for p in ROOT.rglob("__init__.py")
        if "templates" not in p.parts and "static" not in p.parts
    ),
)
def test_every_declared_name_exists(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    assert sorted(declared(package)) == sorted(getattr(module, "__all__", []))
    for name in declared(package):
        assert hasattr(module, name), f"{package}.__all__ names {name!r}"
