"""The quickstart's app.py, copied from the README and the docs, works as written."""

from __future__ import annotations

import pathlib
import re
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def quickstart_app(path: pathlib.Path) -> str:
    """The first Python block of ``path``: the quickstart's ``app.py``."""
    found = re.search(r"```python\n(.*?)```", path.read_text(), re.S)
    assert found is not None, f"no Python block in {path}"
    return found.group(1)


@pytest.mark.parametrize("document", ["README.md", "docs/quickstart.md"])
def test_the_quickstart_app_runs_its_task_from_the_view(
    document: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Eager mode runs the job inside the request, with no SQS to reach.
    monkeypatch.setenv("FLASK_SQS_JOBS_EAGER", "true")
    module = types.ModuleType("app")
    exec(compile(quickstart_app(ROOT / document), document, "exec"), module.__dict__)

    response = module.app.test_client().post(
        "/signup", data={"email": "ada@example.com"}
    )

    assert response.status_code == 202
    assert set(response.get_json()) == {"job_id"}
    assert "sending the welcome email to ada@example.com" in capsys.readouterr().out
