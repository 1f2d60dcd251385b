"""``make floors``: the unit tier in a virtualenv with every dependency at its floor.

A floor that is never installed is a floor that is never tested. This reads the
``name>=X`` requirements of the runtime dependencies and of every user-facing extra
from pyproject.toml, installs the project into ``.venv-floors`` with each of them
pinned to ``==X`` (packages they pull in, and the test tools, resolve as usual),
checks that pip installed exactly those versions, and runs the unit tier there.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-floors"
#: Extras that are not dependencies of a user's install.
_TOOL_EXTRAS = frozenset({"dev", "docs"})
#: Test dependencies that must move with a pinned runtime one.
_COMPANIONS = {"opentelemetry-sdk": "opentelemetry-api"}
#: ``name>=X``, optionally with an upper bound (``name>=X,<Y``).
_FLOOR = re.compile(
    r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*>=\s*([^,;\s]+)\s*(?:,\s*<[^,;\s]+)?\s*$"
)


def pins(extras: bool = True) -> dict[str, str]:
    """Floor version per distribution name: the runtime dependencies, and the
    user-facing extras' when ``extras``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    if extras:
        for name, group in project["optional-dependencies"].items():
            if name not in _TOOL_EXTRAS:
                specs.extend(group)
    found: dict[str, str] = {}
    for spec in specs:
        match = _FLOOR.match(spec)
        if match is None:
            continue
        name, extra, version = match.groups()
        found[_normal(name)] = version
        if extra and "binary" in extra and _normal(name) == "psycopg":
            found["psycopg-binary"] = version
    for companion, leader in _COMPANIONS.items():
        if leader in found:
            found[companion] = found[leader]
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(version: str) -> str:
    """``1.34`` and ``1.34.0`` alike."""
    parts = version.split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return ".".join(parts)


def _run(*command: str | Path) -> None:
    print("+", " ".join(str(part) for part in command), flush=True)
    subprocess.run([str(part) for part in command], check=True, cwd=ROOT)


def main() -> int:
    floors = pins()
    constraints = VENV / "floors.txt"
    python = VENV / "bin" / "python"
    if not python.exists():
        _run(sys.executable, "-m", "venv", VENV)
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(floors.items())))
    _run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(python, "-m", "pip", "install", "--quiet", "-c", constraints, "-e", ".[dev]")
    _check_installed(python, floors)
    _run(python, "-m", "pytest", "-m", "not integration", "-n", "2", *sys.argv[1:])
    return 0


def _check_installed(python: Path, floors: dict[str, str]) -> None:
    listing = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = dict(
        (_normal(line.split("==")[0]), line.split("==")[1])
        for line in listing.splitlines()
        if "==" in line
    )
    wrong = {
        name: installed.get(name)
        for name, version in floors.items()
        if _release(installed.get(name, "")) != _release(version)
    }
    if wrong:
        raise SystemExit(f"floors: not installed at their floor: {wrong}")
    print(f"floors: {len(floors)} dependencies at their floor", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
