"""docs/architecture.md stays true: what it names exists, and it names every module."""

from __future__ import annotations

import re

from tests.test_boundaries import ROOT

DOC = ROOT.parent / "docs" / "architecture.md"
NAMED = re.compile(r"`((?:[a-z_]+/)*[a-z_]+\.py)`")


def named_modules() -> set[str]:
    """Module paths the page names in backquotes, relative to the package."""
    names = set(NAMED.findall(DOC.read_text()))
    return {name for name in names if not name.startswith("tests/")}


def package_modules() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for path in ROOT.rglob("*.py")
        if path.name != "__init__.py"
    }


def test_every_module_the_page_names_exists() -> None:
    missing = sorted(named_modules() - package_modules())
    assert missing == [], (
        f"docs/architecture.md names modules that do not exist: {missing}"
    )


def test_the_page_names_every_module_of_the_package() -> None:
    unnamed = sorted(package_modules() - named_modules())
    assert unnamed == [], f"docs/architecture.md does not name: {unnamed}"


def test_a_module_that_does_not_exist_is_caught() -> None:
    assert "engine/worker/_settling.py" in named_modules()
    assert "engine/worker/_settling.py" in package_modules()
    assert "engine/_eager.py" not in package_modules()
