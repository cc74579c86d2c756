"""The shop's Standard Webhooks receiver, as the tests of events out stand it up, and the stream records that feed
them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeSerializer
from standardwebhooks.webhooks import Webhook

from chalicelib.platforms.http import HttpResponse

# A Standard Webhooks signing secret: `whsec_` and base64 of 24+ random bytes (spec/standard-webhooks.md,
# "Signature scheme": https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md).
SECRET = "whsec_c2hvcC1yZWNlaXZlci1zaWduaW5nLXNlY3JldC0zMmI="
URL = "https://crm.example/hooks/bisn"


@dataclass
class Receiver:
    """The shop's endpoint: verifies each delivery with the Standard Webhooks library, as a receiver would, and
    answers the statuses it is told to (then 204)."""

    statuses: list[int] = field(default_factory=list)
    taken: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)

    def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        assert (method, url) == ("POST", URL)
        text = (body or b"").decode()
        # verify() checks webhook-id, webhook-timestamp (within five minutes of now) and the v1 signature over
        # "{webhook-id}.{webhook-timestamp}.{body}"; it raises on any mismatch.
        document = Webhook(SECRET).verify(text, dict(headers))
        status = self.statuses.pop(0) if self.statuses else 204
        if 200 <= status < 300 and headers["webhook-id"] not in self.ids:
            self.ids.add(headers["webhook-id"])  # receivers de-duplicate on webhook-id
            self.taken.append((dict(headers), document))
        return HttpResponse(status, b"", {"retry-after": "60"} if status == 429 else {})


def stream_records(facts: list[dict[str, Any]], now: float = 0.0) -> list[dict[str, Any]]:
    """The records DynamoDB Streams hands the events feed for new facts, as Lambda's DynamoDB event carries them
    (https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html: awsRegion, eventID, eventName, eventSourceARN, and
    dynamodb's ApproximateCreationDateTime, Keys, NewImage in DynamoDB JSON, SequenceNumber, SizeBytes,
    StreamViewType)."""
    serializer = TypeSerializer()
    return [
        {
            "awsRegion": "eu-west-2",
            "eventID": f"{n}",
            "eventName": "INSERT",
            "eventSource": "aws:dynamodb",
            "eventSourceARN": "arn:aws:dynamodb:eu-west-2:123456789012:table/bisn-audit/stream/2026-12-04T00:00:00.000",
            "dynamodb": {
                "ApproximateCreationDateTime": now,
                "Keys": {"sku": serializer.serialize(f["sku"]), "ts": serializer.serialize(f["ts"])},
                "NewImage": {k: serializer.serialize(v) for k, v in f.items()},
                "SequenceNumber": f"{n:021d}",
                "SizeBytes": 200,
                "StreamViewType": "NEW_IMAGE",
            },
        }
        for n, f in enumerate(facts, start=1)
    ]
