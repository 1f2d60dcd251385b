"""docs/lambda-template.yaml: the SAM template docs/lambda.md shows, checked.

The template is parsed as YAML (CloudFormation's short tags kept as plain
values), then held to what the handler relies on: batch item failures
reported, a visibility timeout that outlasts a batch, a handler that names a
module function, and the permissions the handler's own calls need.
"""

from __future__ import annotations

import pathlib
import typing as t

import yaml

DOCS = pathlib.Path(__file__).parents[2] / "docs"
TEMPLATE = DOCS / "lambda-template.yaml"


class _TemplateLoader(yaml.SafeLoader):
    """A safe loader that reads ``!Ref``, ``!GetAtt``, ``!Sub`` ... as their value."""


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> t.Any:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node)}
    return {suffix: loader.construct_mapping(t.cast(yaml.MappingNode, node))}


_TemplateLoader.add_multi_constructor("!", _tagged)


def template() -> dict[str, t.Any]:
    loaded = yaml.load(TEMPLATE.read_text(), Loader=_TemplateLoader)
    assert isinstance(loaded, dict)
    return loaded


def test_the_mapping_reports_batch_item_failures_in_small_batches() -> None:
    function = template()["Resources"]["JobsFunction"]["Properties"]
    (source,) = function["Events"].values()
    assert source["Type"] == "SQS"
    mapping = source["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert 1 <= mapping["BatchSize"] <= 10
    assert mapping["Queue"] == {"GetAtt": "JobsQueue.Arn"}
    assert mapping["ScalingConfig"]["MaximumConcurrency"] >= 2


def test_the_queue_outlasts_a_batch_and_keeps_dead_letters() -> None:
    resources = template()["Resources"]
    function = resources["JobsFunction"]["Properties"]
    queue = resources["JobsQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * function["Timeout"]
    assert function["Timeout"] <= 900
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "GetAtt": "JobsDeadLetters.Arn"
    }


def test_the_handler_and_its_permissions() -> None:
    function = template()["Resources"]["JobsFunction"]["Properties"]
    module, _, name = function["Handler"].rpartition(".")
    assert module.isidentifier()
    assert name.isidentifier()
    policies = function["Policies"]
    statements = [s for p in policies if "Statement" in p for s in p["Statement"]]
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {"sqs:GetQueueAttributes", "lambda:ListEventSourceMappings"} <= actions
    senders = [
        p["SQSSendMessagePolicy"]["QueueName"]
        for p in policies
        if "SQSSendMessagePolicy" in p
    ]
    assert {"GetAtt": "JobsDeadLetters.QueueName"} in senders


def test_the_lambda_page_shows_this_template() -> None:
    page = (DOCS / "lambda.md").read_text()
    assert "```{literalinclude} lambda-template.yaml" in page
