"""Sphinx configuration: MyST Markdown pages, furo theme, autodoc for the API page.

Build with ``make docs`` or ``sphinx-build -E -W -b html docs docs/_build/html``.
"""

from __future__ import annotations

import importlib.metadata
import socket
import urllib.parse

# -- Project ------------------------------------------------------------------

project = "flask-sqs-jobs"
author = "flask-sqs-jobs developers"
copyright = "flask-sqs-jobs developers"
release = importlib.metadata.version("flask-sqs-jobs")
version = ".".join(release.split(".")[:2])

# -- General ------------------------------------------------------------------

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.extlinks",
    "sphinx.ext.intersphinx",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]

myst_enable_extensions = ["colon_fence", "deflist", "fieldlist"]
myst_heading_anchors = 3

autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True

_source = "https://github.com/flask-sqs-jobs/flask-sqs-jobs"
extlinks = {
    "issue": (f"{_source}/issues/%s", "#%s"),
    "pr": (f"{_source}/pull/%s", "#%s"),
}

_inventories = {
    "python": ("https://docs.python.org/3/", None),
    "flask": ("https://flask.palletsprojects.com/en/stable/", None),
}


def _reachable(url: str) -> bool:
    """Whether the inventory's host answers; offline builds skip intersphinx."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        socket.create_connection((host, 443), timeout=3).close()
    except OSError:
        return False
    return True


# Without network access intersphinx can only warn, and -W turns the warning
# into a failure that says nothing about the docs: link what can be reached.
intersphinx_mapping = {
    name: target for name, target in _inventories.items() if _reachable(target[0])
}

# -- HTML ---------------------------------------------------------------------

html_theme = "furo"
html_title = f"flask-sqs-jobs {release}"
html_static_path: list[str] = []
