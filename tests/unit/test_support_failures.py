"""support/failures.py: which failures around the data become one line, and which are left to show as they are."""

from __future__ import annotations

from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ProfileNotFound

from chalicelib.config import ConfigError
from support.failures import describe


def client_error(code: str, message: str, operation: str) -> ClientError:
    # The shape botocore gives every service error: {"Error": {"Code", "Message"}} (botocore.exceptions.ClientError).
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


def test_refusals_by_aws_name_the_operation_and_the_code() -> None:
    error = client_error("AccessDeniedException", "User: x is not authorized to perform: dynamodb:Query", "Query")
    assert describe(error) == "Query: these credentials may not do this (AccessDeniedException)"
    expired = client_error("ExpiredTokenException", "The security token included in the request is expired", "GetItem")
    assert describe(expired) == "GetItem: the credentials have expired: sign in again (ExpiredTokenException)"


def test_a_missing_queue_says_where_it_was_looked_for() -> None:
    error = client_error(
        "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.", "GetQueueUrl"
    )
    assert describe(error, endpoint="http://127.0.0.1:4566") == (
        "GetQueueUrl at http://127.0.0.1:4566: The specified queue does not exist. "
        "(AWS.SimpleQueueService.NonExistentQueue): is this stage deployed in this region "
        "(or, locally, is `make dev` running)?"
    )


def test_network_failures_point_at_the_emulator_only_when_there_is_one() -> None:
    down = EndpointConnectionError(endpoint_url="http://127.0.0.1:4566/")
    assert describe(down, endpoint="http://127.0.0.1:4566").endswith(
        "is the emulator running? Start it with `make dev`"
    )
    slow = ConnectTimeoutError(endpoint_url="https://dynamodb.eu-west-2.amazonaws.com/")
    assert describe(slow) == "cannot reach AWS (ConnectTimeoutError): check the network and the region"


def test_a_wrapped_failure_is_found_through_its_cause() -> None:
    try:
        try:
            raise ProfileNotFound(profile="shop")
        except ProfileNotFound as inner:
            raise RuntimeError("could not load the secret") from inner
    except RuntimeError as outer:
        assert describe(outer) == "AWS credentials could not be loaded: The config profile (shop) could not be found"
    assert describe(ConfigError("AWS_REGION is required")) == "stage settings: AWS_REGION is required"


def test_anything_else_is_left_alone() -> None:
    assert describe(client_error("ConditionalCheckFailedException", "", "PutItem")) is None
    assert describe(ValueError("a bug")) is None
