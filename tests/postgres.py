"""A throwaway PostgreSQL cluster for the tests that need a real one.

The cluster is made with ``initdb`` in a temporary directory and started with
``pg_ctl`` on a free loopback port (and a unix socket in that directory). As
root, PostgreSQL refuses to run, so the cluster belongs to ``nobody`` then.
Without PostgreSQL binaries, the tests that need it skip with one line; with
``CI=true`` they fail instead, since CI installs PostgreSQL.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import glob
import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile
import uuid

import pytest

from tests.integration.servers import free_port


def postgres_bin_dir() -> pathlib.Path | None:
    """The directory of ``initdb`` and ``pg_ctl``, newest version first, or None."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(candidate, "initdb"), os.X_OK):
            return pathlib.Path(candidate)
    found = shutil.which("initdb")
    return pathlib.Path(found).parent if found else None


def require_postgres() -> pathlib.Path:
    """Return the binaries' directory, or skip (fail in CI) when there is none."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        reason = "PostgreSQL not installed (apt-get install postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI must run the PostgreSQL tests")
        pytest.skip(reason)
    return bin_dir


def _demote() -> cabc.Callable[[], None] | None:
    if os.geteuid() != 0:
        return None
    nobody = pwd.getpwnam("nobody")

    def demote() -> None:
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    return demote


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A running cluster: the URL of its ``postgres`` db, and a way to restart it."""

    url: str
    restart: cabc.Callable[[], None]


@contextlib.contextmanager
def postgres_cluster() -> cabc.Iterator[str]:
    """Start a cluster; yield a ``postgresql+psycopg://`` URL of its ``postgres`` db."""
    with postgres_server() as cluster:
        yield cluster.url


@contextlib.contextmanager
def postgres_server() -> cabc.Iterator[Cluster]:
    """Start a cluster; yield it (:meth:`Cluster.restart` is ``pg_ctl restart``).

    A restart stops the server in ``fast`` mode (open sessions are ended)
    and starts it again on the same port with the same options.
    """
    bin_dir = require_postgres()
    root = pathlib.Path(tempfile.mkdtemp(prefix="sqs-jobs-pg-"))
    demote = _demote()
    if demote is not None:
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
    data, port = root / "data", free_port()
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}

    def run(*args: str) -> None:
        subprocess.run(
            args,
            check=True,
            env=env,
            cwd=root,
            preexec_fn=demote,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    run(
        str(bin_dir / "initdb"),
        "-D",
        str(data),
        "-U",
        "postgres",
        "--auth=trust",
        "--no-sync",
        "-E",
        "UTF8",
    )
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port}"
        f" -c unix_socket_directories={root}"
        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        " -c max_connections=200"
    )
    run(
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-w",
        "-t",
        "60",
        "-l",
        str(root / "log"),
        "start",
    )
    pg_ctl = [str(bin_dir / "pg_ctl"), "-D", str(data)]

    def restart() -> None:
        run(*pg_ctl, "-m", "fast", "-w", "-t", "60", "-l", str(root / "log"), "restart")

    try:
        yield Cluster(
            f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", restart
        )
    finally:
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(server_url: str) -> str:
    """Create an empty database on the cluster; return its URL."""
    import sqlalchemy as sa

    name = f"t_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    engine.dispose()
    return server_url.rsplit("/", 1)[0] + f"/{name}"
