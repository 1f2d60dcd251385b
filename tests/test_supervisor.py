"""The supervisor's health verdict and metrics merge, without processes.

``tests/integration/test_processes.py`` runs the supervisor for real.
"""

from __future__ import annotations

import collections.abc as cabc
import socket
import threading
import time
import typing as t

import pytest
from flask_sqs_jobs.commands._supervisor_health import Child
from flask_sqs_jobs.commands._supervisor_health import merge_metrics
from flask_sqs_jobs.commands._supervisor_health import STALE_AFTER_SECONDS
from flask_sqs_jobs.commands._supervisor_health import SupervisorHealth
from flask_sqs_jobs.engine.ops import _probe_http
from prometheus_client.parser import text_string_to_metric_families

from tests.probe_clients import Crowd
from tests.probe_clients import get
from tests.probe_clients import PROBE_DEADLINE
from tests.probe_clients import read_until_closed
from tests.probe_clients import request

T = t.TypeVar("T")

HEALTHY = {"healthy": True, "reason": "ok", "busy_slots": 0}


@pytest.fixture
def health() -> cabc.Iterator[t.Callable[..., SupervisorHealth]]:
    made: list[SupervisorHealth] = []

    def make(*children: Child) -> SupervisorHealth:
        made.append(SupervisorHealth(list(children), threading.Lock(), "127.0.0.1", 0))
        return made[-1]

    yield make
    for server in made:
        server.close_in_child()


def answered(index: int, pid: int, status: dict[str, t.Any], ago: float = 0) -> Child:
    return Child(index, pid=pid, status=status, answered_at=time.monotonic() - ago)


def test_healthy_only_while_every_process_is(
    health: t.Callable[..., SupervisorHealth],
) -> None:
    report = health(answered(0, 10, HEALTHY), answered(1, 11, HEALTHY)).status()

    assert (report["healthy"], report["reason"]) == (True, "ok")
    assert [(p["process"], p["pid"], p["busy_slots"]) for p in report["processes"]] == [
        (0, 10, 0),
        (1, 11, 0),
    ]


@pytest.mark.parametrize(
    ("child", "reason"),
    [
        (
            lambda: Child(1, pid=None, restart_at=1.0),
            "process 1 (pid None): is being restarted",
        ),
        (lambda: Child(1, pid=11), "process 1 (pid 11): is starting"),
        (
            lambda: answered(1, 11, HEALTHY, ago=STALE_AFTER_SECONDS + 2),
            "process 1 (pid 11): has not answered its health check for 5 s",
        ),
        (
            lambda: answered(1, 11, {"healthy": False, "reason": "no receive"}),
            "process 1 (pid 11): no receive",
        ),
    ],
)
def test_one_unhealthy_process_makes_the_whole_unhealthy_naming_it(
    health: t.Callable[..., SupervisorHealth],
    child: t.Callable[[], Child],
    reason: str,
) -> None:
    report = health(answered(0, 10, HEALTHY), child()).status()

    assert (report["healthy"], report["reason"]) == (False, reason)
    assert [p["healthy"] for p in report["processes"]] == [True, False]


PROCESS_TEXT = """\
# HELP sqs_jobs_jobs_total Jobs finished, by outcome.
# TYPE sqs_jobs_jobs_total counter
sqs_jobs_jobs_total{{job_type="record",outcome="success",queue="default"}} {jobs}
# HELP sqs_jobs_busy_slots Jobs running now.
# TYPE sqs_jobs_busy_slots gauge
sqs_jobs_busy_slots {busy}
# HELP sqs_jobs_job_duration_seconds Time from a job's start to its settling.
# TYPE sqs_jobs_job_duration_seconds histogram
sqs_jobs_job_duration_seconds_bucket{{job_type="a",le="1.0",queue="q"}} {jobs}
sqs_jobs_job_duration_seconds_bucket{{job_type="a",le="+Inf",queue="q"}} {jobs}
sqs_jobs_job_duration_seconds_count{{job_type="a",queue="q"}} {jobs}
sqs_jobs_job_duration_seconds_sum{{job_type="a",queue="q"}} 0.5
"""


def test_metrics_of_processes_merge_with_a_process_label() -> None:
    merged = merge_metrics(
        {
            1: PROCESS_TEXT.format(jobs=2, busy=1),
            0: PROCESS_TEXT.format(jobs=3, busy=0),
        }
    ).decode()

    families = {f.name: f for f in text_string_to_metric_families(merged)}
    assert sorted(families) == [
        "sqs_jobs_busy_slots",
        "sqs_jobs_job_duration_seconds",
        "sqs_jobs_jobs",
    ]
    assert merged.count("# TYPE sqs_jobs_jobs_total counter") == 1
    jobs = {s.labels["process"]: s.value for s in families["sqs_jobs_jobs"].samples}
    assert jobs == {"0": 3, "1": 2}
    busy = families["sqs_jobs_busy_slots"].samples
    assert {s.labels["process"]: s.value for s in busy} == {"0": 0, "1": 1}
    histogram = families["sqs_jobs_job_duration_seconds"]
    assert histogram.type == "histogram"
    assert {
        (s.name, s.labels["process"])
        for s in histogram.samples
        if s.name.endswith("_count")
    } == {
        ("sqs_jobs_job_duration_seconds_count", "0"),
        ("sqs_jobs_job_duration_seconds_count", "1"),
    }


def test_no_process_answering_gives_empty_metrics() -> None:
    assert merge_metrics({}) == b""


def test_the_health_port_answers_probes_at_once_despite_slow_clients(
    health: t.Callable[..., SupervisorHealth],
) -> None:
    server = health(answered(0, 10, HEALTHY))
    server.start()
    try:
        crowd = Crowd(server.port, idle=200, dribbling=10, mute=10)
        try:
            answers = [timed(lambda: get(server.port, "/healthz")) for _ in range(20)]
        finally:
            crowd.close()
    finally:
        server.stop()

    assert {(answer[0], answer[2]) for answer, _ in answers} == {(200, b"ok")}
    assert max(took for _, took in answers) < PROBE_DEADLINE


def test_slow_metrics_scrapes_are_limited_and_never_hold_up_a_probe(
    health: t.Callable[..., SupervisorHealth],
) -> None:
    # A process whose health port accepts connections and never answers.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        child = answered(0, 10, HEALTHY)
        child.port = silent.getsockname()[1]
        server = health(child)
        server.start()
        scrapes: list[int] = []
        threads = [
            threading.Thread(
                target=lambda: scrapes.append(get_slowly(server.port, "/metrics"))
            )
            for _ in range(_probe_http.MAX_OFFLOADED + 2)
        ]
        try:
            for thread in threads:
                thread.start()
            (status, _, _), took = timed(lambda: get(server.port, "/healthz"))
            for thread in threads:
                thread.join(10)
        finally:
            server.stop()

    assert status in (200, 503)
    assert took < PROBE_DEADLINE
    assert sorted(scrapes) == [200] * _probe_http.MAX_OFFLOADED + [503, 503]


def timed(call: t.Callable[[], T]) -> tuple[T, float]:
    started = time.monotonic()
    return call(), time.monotonic() - started


def get_slowly(port: int, path: str) -> int:
    raw = f"GET {path} HTTP/1.1\r\n\r\n".encode()
    return request(port, raw, timeout=10)[0]


def test_a_scrape_that_half_closes_after_its_request_gets_the_answer(
    health: t.Callable[..., SupervisorHealth],
) -> None:
    server = health(answered(0, 10, HEALTHY))
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
            sock.shutdown(socket.SHUT_WR)
            answer = read_until_closed(sock, PROBE_DEADLINE)
    finally:
        server.stop()

    assert answer is not None
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
