"""``make audit``: pip-audit over the installed set and over the dependency floors.

The floors (of the runtime dependencies and of every user-facing extra) are read
from pyproject.toml by ``floors.pins`` (``name>=X`` becomes ``name==X``), so the
releases an install may resolve to at its lowest are audited too. When the advisory
service answers for no package (an offline machine), this says so in one line and
exits 0: an audit that could not run is reported, not passed off as clean or failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from floors import pins

ROOT = Path(__file__).resolve().parent.parent


def audit(label: str, args: list[str]) -> int | None:
    """Run pip-audit: how many packages are vulnerable, None if none was audited."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip_audit",
            "--format",
            "json",
            "--progress-spinner",
            "off",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        sys.stderr.write(run.stderr)
        raise SystemExit(
            f"audit ({label}): pip-audit failed (exit {run.returncode})"
        ) from None
    deps = report.get("dependencies", [])
    audited = [d for d in deps if "skip_reason" not in d]
    if deps and not audited:
        return None
    vulnerable = [d for d in audited if d.get("vulns")]
    for dep in vulnerable:
        ids = ", ".join(v["id"] for v in dep["vulns"])
        print(f"audit ({label}): {dep['name']} {dep['version']}: {ids}")
    print(f"audit ({label}): {len(audited)} audited, {len(vulnerable)} vulnerable")
    return len(vulnerable)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "floors.txt"
        requirements.write_text("".join(f"{n}=={v}\n" for n, v in pins().items()))
        results = [
            audit("installed", ["--local"]),
            audit("floors", ["--no-deps", "--disable-pip", "-r", str(requirements)]),
        ]
    if any(r is None for r in results):
        print("audit: the advisory service did not answer; nothing was audited")
        return 0
    return 1 if any(results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
