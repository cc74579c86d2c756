"""Staff alerts through one SNS topic (email/SMS subscriptions are the shop's choice)."""

from __future__ import annotations

from typing import Any


class StaffAlerts:
    """Publishes short, actionable notes for the shop's staff."""

    def __init__(self, sns: Any, topic_arn: str) -> None:
        self.sns = sns
        self.topic_arn = topic_arn

    def send(self, subject: str, message: str) -> str:
        """Publish one alert and return its message id."""
        # SNS caps subjects at 100 characters.
        response = self.sns.publish(TopicArn=self.topic_arn, Subject=subject[:100], Message=message)
        return str(response["MessageId"])
