"""What ``flask sqs-worker --reload`` watches, and how it starts the worker again."""

from __future__ import annotations

import os
import pathlib
import sys
import types

import pytest
from flask import Flask
from flask_sqs_jobs.commands._reloading import FileWatcher
from flask_sqs_jobs.commands._reloading import restart_command
from flask_sqs_jobs.commands._reloading import watcher_for


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "app.py").write_text("VERSION = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "handlers.py").write_text("def handle(): ...\n")
    return tmp_path


def touch(path: pathlib.Path, text: str) -> None:
    """Rewrite ``path``, its modification time surely moved on."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_a_modified_added_or_removed_python_file_is_a_change(
    project: pathlib.Path,
) -> None:
    watcher = FileWatcher([project], interval=0)
    assert watcher.watched == 2
    assert watcher.changed() == []

    touch(project / "app.py", "VERSION = 2\n")
    assert watcher.changed() == [str(project / "app.py")]
    assert watcher.changed() == []

    (project / "pkg" / "new.py").write_text("")
    (project / "pkg" / "handlers.py").unlink()
    assert watcher.changed() == [
        str(project / "pkg" / "handlers.py"),
        str(project / "pkg" / "new.py"),
    ]


@pytest.mark.parametrize(
    "path",
    [
        ".venv/lib/python3.11/site-packages/lib.py",
        ".git/hooks/hook.py",
        "pkg/__pycache__/handlers.py",
        "node_modules/tool/build.py",
        "venv/lib/site-packages/lib.py",
        "templates/page.html",
        "app.pyc",
        "notes.txt",
    ],
)
def test_other_files_are_not_watched(project: pathlib.Path, path: str) -> None:
    target = project / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("x = 1\n")
    watcher = FileWatcher([project], interval=0)

    touch(target, "x = 2\n")

    assert watcher.changed() == []
    assert watcher.watched == 2


def test_files_are_looked_at_once_per_interval(project: pathlib.Path) -> None:
    watcher = FileWatcher([project], interval=3600)

    touch(project / "app.py", "VERSION = 2\n")

    assert watcher.changed() == []


def test_a_module_outside_the_roots_is_watched_when_listed(
    project: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("shared") / "shared_jobs.py"
    elsewhere.write_text("")
    watcher = FileWatcher([project], [elsewhere], interval=0)

    touch(elsewhere, "changed = True\n")

    assert watcher.changed() == [str(elsewhere.resolve())]


def test_the_watcher_of_an_app_covers_its_root_path(
    project: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(project)
    app = Flask("app", root_path=str(project / "pkg"))

    watcher = watcher_for(app)

    assert watcher.roots == [(project / "pkg").resolve()]
    assert watcher.watched == 1  # pkg/handlers.py; app.py is outside the root


def test_a_module_loaded_from_this_folder_is_watched_outside_the_root(
    project: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("sqs_reload_probe")
    module.__file__ = str(project / "app.py")
    monkeypatch.setitem(sys.modules, "sqs_reload_probe", module)
    monkeypatch.chdir(project)

    watcher = watcher_for(Flask("app", root_path=str(project / "pkg")))

    assert watcher.watched == 2


def test_the_command_is_run_again_as_it_was_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="flask.__main__")  # type: ignore[assignment]
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", ["/x/flask/__main__.py", "sqs-worker", "--reload"])

    command = restart_command()

    assert command[0] == sys.executable
    assert command[-4:] == ["-m", "flask", "sqs-worker", "--reload"]


def test_a_flask_script_is_run_again_by_the_same_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    script = tmp_path / "flask"
    script.write_text("")
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", [str(script), "--app", "app", "sqs-worker"])

    command = restart_command()

    assert command[0] == sys.executable
    assert command[-4:] == [str(script), "--app", "app", "sqs-worker"]
