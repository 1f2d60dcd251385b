"""Entry point: ``python -m bench [--quick] [--repeat N] [--only SECTION]``."""

from bench.envs import ensure_runner

ensure_runner()  # re-executes inside .bench/venv-runner when boto3 is missing

from bench.cli import main  # noqa: E402  (boto3 is importable from here on)

raise SystemExit(main())
