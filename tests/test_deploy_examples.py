"""The copy-ready files under ``deploy/`` parse, and name what exists.

The docs include these files as they are (``literalinclude``), so what a user
copies from a page is what is checked here: the worker's command line parses
with ``flask sqs-worker``'s own options, the stop timeouts leave the worker
time to hand its jobs back, the probes ask the health port's paths, every
metric an alert or a scaling rule names is one a worker serves, and the AWS
documents are accepted by the AWS APIs they are written for.
"""

from __future__ import annotations

import json
import pathlib
import re
import typing as t

import boto3
import pytest
import yaml
from flask_sqs_jobs.commands._worker import worker_command
from flask_sqs_jobs.engine.ops import PrometheusMetrics
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.outbox import bind_outbox_metrics
from moto import mock_aws

from tests.conftest import REGION

DEPLOY = pathlib.Path(__file__).parent.parent / "deploy"
DOCS = pathlib.Path(__file__).parent.parent / "docs"
#: The paths the worker's health port serves.
HEALTH_PATHS = {"/healthz", "/status", "/metrics"}
#: What the worker needs beyond ``--shutdown-timeout`` to hand back what it
#: holds and exit before the platform's SIGKILL (docs/deployment.md).
STOP_MARGIN_SECONDS = 10
#: The most ``--idle-wait`` may be: a long poll in flight at the stop signal
#: ends within it, so a shutdown timeout at least this long covers it.
MAX_IDLE_WAIT_SECONDS = 20
#: The trigger metadata KEDA's ``aws-sqs-queue`` scaler reads (KEDA 2.x).
KEDA_SQS_METADATA = {
    "queueURL",
    "queueURLFromEnv",
    "queueLength",
    "activationQueueLength",
    "awsRegion",
    "awsEndpoint",
    "identityOwner",
    "scaleOnInFlight",
    "scaleOnDelayed",
}
SAMPLE_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
}


def load_yaml(name: str) -> list[dict[str, t.Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def load_json(name: str) -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], json.loads((DEPLOY / name).read_text()))


def worker_options(command: list[str]) -> dict[str, t.Any]:
    """Parse a container's ``flask ... sqs-worker ...`` as the CLI would."""
    assert command[0] == "flask"
    assert "sqs-worker" in command, command
    args = command[command.index("sqs-worker") + 1 :]
    context = worker_command.make_context("sqs-worker", args)
    return dict(context.params)


def one_of_kind(docs: list[dict[str, t.Any]], kind: str) -> dict[str, t.Any]:
    [doc] = [doc for doc in docs if doc["kind"] == kind]
    return doc


def served_metric_names(tmp_path: pathlib.Path) -> set[str]:
    """Every sample name a worker's ``/metrics`` can serve (with a SQL store)."""
    metrics = PrometheusMetrics()
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        bind_outbox_metrics(metrics, store)
        families = list(metrics.registry.collect())
    finally:
        store.close()
    return {
        family.name + suffix
        for family in families
        for suffix in SAMPLE_SUFFIXES.get(family.type, ("",))
    }


def test_every_file_is_included_by_a_docs_page() -> None:
    pages = "\n".join(page.read_text() for page in DOCS.glob("*.md"))
    files = [p for p in DEPLOY.rglob("*") if p.is_file() and p.name != "README.md"]
    assert files
    for path in files:
        assert f"../{path.relative_to(DEPLOY.parent)}" in pages, path


def test_the_kubernetes_worker_stops_within_its_grace_period_and_probes_health() -> (
    None
):
    deployment = one_of_kind(load_yaml("kubernetes/worker.yaml"), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    options = worker_options(container["command"])

    grace = pod["terminationGracePeriodSeconds"]
    assert options["shutdown_timeout"] is not None
    assert options["shutdown_timeout"] >= MAX_IDLE_WAIT_SECONDS
    assert options["shutdown_timeout"] + STOP_MARGIN_SECONDS <= grace
    # A probe from outside the container needs the port on every interface.
    assert options["health_host"] == "0.0.0.0"
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    for probe in ("startupProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] in HEALTH_PATHS
        assert ports.get(get["port"], get["port"]) == options["health_port"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == options["health_port"]
    assert annotations["prometheus.io/path"] in HEALTH_PATHS
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_keda_scaler_targets_the_deployment_with_the_documented_backlog() -> None:
    docs = load_yaml("kubernetes/keda-scaledobject.yaml")
    scaled = one_of_kind(docs, "ScaledObject")
    auth = one_of_kind(docs, "TriggerAuthentication")
    deployment = one_of_kind(load_yaml("kubernetes/worker.yaml"), "Deployment")

    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "aws-sqs-queue"
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    metadata = trigger["metadata"]
    assert set(metadata) <= KEDA_SQS_METADATA
    # KEDA reads every metadata value as a string.
    assert all(isinstance(value, str) for value in metadata.values())
    assert f"/{metadata['awsRegion']}." in metadata["queueURL"].replace("sqs.", "/")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    concurrency = worker_options(container["command"])["concurrency"]
    # The backlog per pod: its slots x about 1 job/s each x 10 s of waiting.
    assert int(metadata["queueLength"]) == concurrency * 10
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]


@pytest.fixture
def aws() -> t.Iterator[None]:
    with mock_aws():
        yield


@pytest.mark.usefixtures("aws")
def test_the_ecs_task_definition_is_accepted_and_stops_within_fargate_s_limit() -> None:
    task = load_json("ecs/task-definition.json")
    ecs = boto3.client("ecs", region_name=REGION)

    registered = ecs.register_task_definition(**task)["taskDefinition"]

    [container] = registered["containerDefinitions"]
    options = worker_options(container["command"])
    stop_timeout = container["stopTimeout"]
    assert stop_timeout <= 120  # Fargate's limit
    assert options["shutdown_timeout"] >= MAX_IDLE_WAIT_SECONDS
    assert options["shutdown_timeout"] + STOP_MARGIN_SECONDS <= stop_timeout
    # The health check runs inside the container: the default loopback host.
    assert options["health_host"] == "127.0.0.1"
    check = " ".join(container["healthCheck"]["command"])
    urls = re.findall(r"http://127\.0\.0\.1:(\d+)(/\w+)", check)
    assert urls == [(str(options["health_port"]), "/healthz")]


@pytest.mark.usefixtures("aws")
def test_the_ecs_scaling_policy_is_accepted_for_the_scalable_target() -> None:
    target = load_json("ecs/scalable-target.json")
    policy = load_json("ecs/scaling-policy.json")
    _, cluster, service_name = target["ResourceId"].split("/")
    ecs = boto3.client("ecs", region_name=REGION)
    ecs.create_cluster(clusterName=cluster)
    task = ecs.register_task_definition(**load_json("ecs/task-definition.json"))
    ecs.create_service(
        cluster=cluster,
        serviceName=service_name,
        taskDefinition=task["taskDefinition"]["taskDefinitionArn"],
        desiredCount=1,
    )
    scaling = boto3.client("application-autoscaling", region_name=REGION)

    scaling.register_scalable_target(**target)
    scaling.put_scaling_policy(**policy)

    [stored] = scaling.describe_scaling_policies(
        ServiceNamespace=target["ServiceNamespace"], ResourceId=target["ResourceId"]
    )["ScalingPolicies"]
    assert stored["PolicyName"] == policy["PolicyName"]
    metrics = policy["TargetTrackingScalingPolicyConfiguration"][
        "CustomizedMetricSpecification"
    ]["Metrics"]
    [returned] = [metric for metric in metrics if metric["ReturnData"]]
    ids = {metric["Id"] for metric in metrics if not metric["ReturnData"]}
    assert set(re.findall(r"[a-z_]+", returned["Expression"])) == ids
    dimensions = {
        d["Name"]: d["Value"]
        for metric in metrics
        if "MetricStat" in metric
        for d in metric["MetricStat"]["Metric"]["Dimensions"]
    }
    assert dimensions["ClusterName"] == cluster
    assert dimensions["ServiceName"] == service_name
    keda = one_of_kind(load_yaml("kubernetes/keda-scaledobject.yaml"), "ScaledObject")
    [trigger] = keda["spec"]["triggers"]
    # One backlog target per worker, whichever platform runs it.
    target_value = policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"]
    assert target_value == int(trigger["metadata"]["queueLength"])
    assert trigger["metadata"]["queueURL"].endswith("/" + dimensions["QueueName"])


def test_every_metric_the_alerts_name_is_one_a_worker_serves(
    tmp_path: pathlib.Path,
) -> None:
    [rules_file] = load_yaml("prometheus/alerts.yaml")
    served = served_metric_names(tmp_path)

    rules = [rule for group in rules_file["groups"] for rule in group["rules"]]
    assert rules
    named = set()
    for rule in rules:
        assert rule["alert"]
        assert rule["annotations"]["summary"]
        expr = rule["expr"]
        assert expr.count("(") == expr.count(")"), rule["alert"]
        named.update(re.findall(r"\bsqs_jobs_\w+", expr))
    assert named
    assert named <= served, sorted(named - served)
