"""SNS SMS delivery status records, and the invocation a CloudWatch Logs subscription filter makes with them.

Each builder follows the shape AWS documents, with values of our own; the source is named at each one.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

ACCOUNT = "123456789012"
REGION = "eu-west-2"
FAILURE_GROUP = f"sns/{REGION}/{ACCOUNT}/DirectPublishToPhoneNumber/Failure"

# SNS Developer Guide, "Amazon SNS SMS delivery monitoring with CloudWatch metrics and logs", "SMS delivery failure
# reasons": every providerResponse SNS documents for a failed delivery.
FAILURE_REASONS = (
    "Blocked as spam by phone carrier",
    "Destination is on a blocked list",
    "Invalid phone number",
    "Message body is invalid",
    "Phone carrier has blocked this message",
    "Phone carrier is currently unreachable/unavailable",
    "Phone has blocked SMS",
    "Phone is on a blocked list",
    "Phone is currently unreachable/unavailable",
    "Phone number is opted out",
    "This delivery would exceed max price",
    "Unknown error attempting to reach phone",
)


def failed(
    number: str,
    provider_response: str = "Unknown error attempting to reach phone",
    message_id: str = "1077257a-92f3-5ca3-bc97-6a915b310625",
) -> dict[str, Any]:
    """A delivery status record of a failed SMS.

    Shape: the same guide, "Example log for failed SMS delivery" (notification.messageId and timestamp; delivery's
    mnc, numberOfMessageParts, destination, priceInUSD, smsType, mcc, providerResponse, dwellTimeMs,
    dwellTimeMsUntilDeviceAck; status FAILURE).
    """
    return {
        "notification": {"messageId": message_id, "timestamp": "2026-03-14 09:26:53.589"},
        "delivery": {
            "mnc": 0,
            "numberOfMessageParts": 3,
            "destination": number,
            "priceInUSD": 0.1152,
            "smsType": "Transactional",
            "mcc": 0,
            "providerResponse": provider_response,
            "dwellTimeMs": 1420,
            "dwellTimeMsUntilDeviceAck": 1692,
        },
        "status": "FAILURE",
    }


def delivered(number: str, message_id: str = "34d9b400-c6dd-5444-820d-fbeb0f1f54cf") -> dict[str, Any]:
    """A delivery status record of a delivered SMS (written only for the sampled share of successes).

    Shape: the same guide, "Example log for successful SMS delivery".
    """
    return {
        "notification": {"messageId": message_id, "timestamp": "2026-03-14 09:26:53.588"},
        "delivery": {
            "phoneCarrier": "A Phone Carrier",
            "mnc": 10,
            "numberOfMessageParts": 3,
            "destination": number,
            "priceInUSD": 0.1152,
            "smsType": "Transactional",
            "mcc": 234,
            "providerResponse": "Message has been accepted by phone carrier",
            "dwellTimeMs": 599,
            "dwellTimeMsUntilDeviceAck": 1344,
        },
        "status": "SUCCESS",
    }


def subscription_event(*records: dict[str, Any] | str, message_type: str = "DATA_MESSAGE") -> dict[str, Any]:
    """The event a subscription filter invokes a Lambda function with: {"awslogs": {"data": ...}}, the data being
    base64 of gzip of a JSON document.

    Shape: CloudWatch Logs User Guide, "Subscription filters with AWS Lambda" (the decoded document's messageType,
    owner, logGroup, logStream, subscriptionFilters and logEvents of id, timestamp and message).
    """
    document = {
        "messageType": message_type,
        "owner": ACCOUNT,
        "logGroup": FAILURE_GROUP,
        "logStream": "3a6c1f5e-0f9b-4c3e-8d51-2f2d3b0c9a11",
        "subscriptionFilters": ["bisn-sms_feedback"],
        "logEvents": [
            {
                "id": f"3719578932757718291765841720519843876553{i:04d}",
                "timestamp": 1773480413589 + i,
                "message": record if isinstance(record, str) else json.dumps(record),
            }
            for i, record in enumerate(records)
        ],
    }
    data = base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()
    return {"awslogs": {"data": data}}
