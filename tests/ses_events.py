"""SES event records as SES publishes them to SNS, and the SNS notification the feedback queue receives.

Each builder follows the shape AWS documents, with values of our own; the source is named at each one.
"""

from __future__ import annotations

import json
from typing import Any

ACCOUNT = "123456789012"
TOPIC = f"arn:aws:sns:eu-west-2:{ACCOUNT}:bisn-ses-feedback"
SENDER = "Walnut & Wool <hello@walnut-and-wool.test>"


def mail(to: str, message_id: str = "0102018f-feed-back-0000-000000000001-000000") -> dict[str, Any]:
    """The `mail` object of every event record.

    Shape: SES Developer Guide, "Contents of event data that Amazon SES publishes to Amazon SNS", "Mail object"
    (timestamp, source, sourceArn, sendingAccountId, messageId, destination, headersTruncated, headers,
    commonHeaders, tags).
    """
    return {
        "timestamp": "2025-03-14T09:26:53.589Z",
        "source": SENDER,
        "sourceArn": f"arn:aws:ses:eu-west-2:{ACCOUNT}:identity/walnut-and-wool.test",
        "sendingAccountId": ACCOUNT,
        "messageId": message_id,
        "destination": [to],
        "headersTruncated": False,
        "headers": [
            {"name": "From", "value": SENDER},
            {"name": "To", "value": to},
            {"name": "Subject", "value": "Back in stock"},
            {"name": "MIME-Version", "value": "1.0"},
        ],
        "commonHeaders": {"from": [SENDER], "to": [to], "messageId": message_id, "subject": "Back in stock"},
        "tags": {
            "ses:operation": ["SendEmail"],
            "ses:configuration-set": ["bisn-feedback"],
            "ses:source-ip": ["192.0.2.10"],
            "ses:from-domain": ["walnut-and-wool.test"],
            "ses:caller-identity": ["bisn-notifier"],
        },
    }


def bounce(to: str, bounce_type: str = "Permanent", subtype: str = "General", **mail_args: Any) -> dict[str, Any]:
    """A Bounce event record.

    Shape: SES Developer Guide, "Examples of event data that Amazon SES publishes to Amazon SNS", "Bounce record";
    fields and bounce types (Undetermined, Permanent, Transient) from "Contents of event data ...", "Bounce object".
    """
    status, code = (
        ("5.1.1", "smtp; 550 5.1.1 user unknown")
        if bounce_type == "Permanent"
        else ("4.2.2", "smtp; 452 4.2.2 mailbox full")
    )
    return {
        "eventType": "Bounce",
        "bounce": {
            "bounceType": bounce_type,
            "bounceSubType": subtype,
            "bouncedRecipients": [{"emailAddress": to, "action": "failed", "status": status, "diagnosticCode": code}],
            "timestamp": "2025-03-14T09:26:54.112Z",
            "feedbackId": "0102018f-b0b0-4e1a-9c1d-000000000001-000000",
            "reportingMTA": "dsn; a1-23.smtp-out.eu-west-2.amazonses.com",
        },
        "mail": mail(to, **mail_args),
    }


def complaint(to: str, **mail_args: Any) -> dict[str, Any]:
    """A Complaint event record.

    Shape: SES Developer Guide, "Examples of event data that Amazon SES publishes to Amazon SNS", "Complaint
    record"; fields from "Contents of event data ...", "Complaint object".
    """
    return {
        "eventType": "Complaint",
        "complaint": {
            "complainedRecipients": [{"emailAddress": to}],
            "timestamp": "2025-03-14T10:02:11.000Z",
            "feedbackId": "0102018f-c0c0-4e1a-9c1d-000000000002-000000",
            "userAgent": "ExampleMail Feedback Loop",
            "complaintFeedbackType": "abuse",
            "arrivalDate": "2025-03-14T10:01:58.000Z",
        },
        "mail": mail(to, **mail_args),
    }


def delivery(to: str, **mail_args: Any) -> dict[str, Any]:
    """A Delivery event record.

    Shape: SES Developer Guide, "Examples of event data that Amazon SES publishes to Amazon SNS", "Delivery
    record"; fields from "Contents of event data ...", "Delivery object" (recipients is a list of strings).
    """
    return {
        "eventType": "Delivery",
        "mail": mail(to, **mail_args),
        "delivery": {
            "timestamp": "2025-03-14T09:26:55.201Z",
            "processingTimeMillis": 1612,
            "recipients": [to],
            "smtpResponse": "250 2.0.0 OK",
            "reportingMTA": "a1-23.smtp-out.eu-west-2.amazonses.com",
            "remoteMtaIp": "198.51.100.25",
        },
    }


def via_sns(record: dict[str, Any], sns_message_id: str = "6f1e4a53-0d4b-5c6e-8a7f-2b1c3d4e5f60") -> str:
    """The queue message body: the SNS notification carrying the record as JSON text in `Message`.

    Shape: Amazon SNS Developer Guide, "HTTP/HTTPS notification JSON format" (Type, MessageId, TopicArn,
    Message, Timestamp, SignatureVersion, Signature, SigningCertURL, UnsubscribeURL), which is also the body an
    SQS subscription without raw message delivery receives.
    """
    return json.dumps(
        {
            "Type": "Notification",
            "MessageId": sns_message_id,
            "TopicArn": TOPIC,
            "Message": json.dumps(record),
            "Timestamp": "2025-03-14T09:26:54.300Z",
            "SignatureVersion": "1",
            "Signature": "c2lnbmVkIGJ5IFNOUw==",
            "SigningCertURL": "https://sns.eu-west-2.amazonaws.com/SimpleNotificationService-0000.pem",
            "UnsubscribeURL": f"https://sns.eu-west-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={TOPIC}:1",
        }
    )
