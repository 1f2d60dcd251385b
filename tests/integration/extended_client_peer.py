"""AWS's ``amazon-sqs-extended-client`` as a peer process, for interoperability tests.

Importing that package replaces ``boto3.Session`` in the whole process (every
SQS client made afterwards becomes an extended client), so it runs here, in a
process of its own, never in the test process.

Usage: ``extended_client_peer.py send|receive ENDPOINT QUEUE_URL BUCKET``.
``send`` sends stdin as one message through S3; ``receive`` receives one
message, prints its body and deletes it (and, with the client's default, its
S3 object). The S3 endpoint comes from ``AWS_ENDPOINT_URL_S3``.
"""

from __future__ import annotations

import sys
import typing as t

from sqs_extended_client.client import SQSExtendedClientSession


def main(mode: str, endpoint: str, queue_url: str, bucket: str) -> int:
    session = SQSExtendedClientSession()  # type: ignore[no-untyped-call]
    client: t.Any = session.client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1"
    )
    client.large_payload_support = bucket
    client.always_through_s3 = True
    client.delete_payload_from_s3 = True
    if mode == "send":
        client.send_message(QueueUrl=queue_url, MessageBody=sys.stdin.read())
        return 0
    messages = client.receive_message(
        QueueUrl=queue_url, MessageAttributeNames=["All"], WaitTimeSeconds=5
    ).get("Messages", [])
    if not messages:
        return 1
    sys.stdout.write(messages[0]["Body"])
    client.delete_message(
        QueueUrl=queue_url, ReceiptHandle=messages[0]["ReceiptHandle"]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
