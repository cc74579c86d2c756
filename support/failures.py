"""What went wrong around the data, said in one line: no credentials, no emulator, a table or queue missing.

`bisn` talks to AWS (or the local emulator) with the caller's own credentials, so most failures are about the
surroundings, not the shop's data. Each becomes a sentence saying what is wrong and what to do, instead of a
traceback; anything not recognised here is left alone so a real bug still shows its traceback.
"""

from __future__ import annotations

from botocore.exceptions import (
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
)

from chalicelib.config import ConfigError

# AWS error codes (as botocore reports them in Error.Code) and what each means for someone running bisn.
MISSING_HINT = "is this stage deployed in this region (or, locally, is `make dev` running)?"
MISSING = {
    "ResourceNotFoundException",  # DynamoDB: no such table; Secrets Manager: no such secret
    "AWS.SimpleQueueService.NonExistentQueue",  # SQS's query protocol
    "QueueDoesNotExist",  # SQS's JSON protocol
    "NotFoundException",  # SNS: no such topic
}
REFUSED = {
    "UnrecognizedClientException": "AWS does not recognise these credentials",
    "InvalidClientTokenId": "AWS does not recognise these credentials",
    "InvalidSignatureException": "AWS refused the request's signature: check the secret access key",
    "SignatureDoesNotMatch": "AWS refused the request's signature: check the secret access key",
    "ExpiredToken": "the credentials have expired: sign in again",
    "ExpiredTokenException": "the credentials have expired: sign in again",
    "AccessDenied": "these credentials may not do this",
    "AccessDeniedException": "these credentials may not do this",
}


def describe(error: BaseException, *, endpoint: str | None = None) -> str | None:
    """One line for an infrastructure failure, or None when `error` is not one (let it surface as it is).

    A library may wrap the AWS error (secrets are read through Powertools, whose GetParameterError carries the
    botocore error as its cause), so the chain of causes is searched too.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        line = _describe_one(current, endpoint)
        if line is not None:
            return line
        current = current.__cause__ or current.__context__
    return None


def _describe_one(error: BaseException, endpoint: str | None) -> str | None:
    where = f" at {endpoint}" if endpoint else ""
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return (
            "no AWS credentials: set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), "
            "or use --stage local against `make dev`"
        )
    if isinstance(error, ProfileNotFound | SSOError | TokenRetrievalError | CredentialRetrievalError):
        return f"AWS credentials could not be loaded: {error}"
    if isinstance(error, ConnectionError | HTTPClientError):
        if endpoint:
            return (
                f"cannot reach AWS{where} ({type(error).__name__}): is the emulator running? Start it with `make dev`"
            )
        return f"cannot reach AWS ({type(error).__name__}): check the network and the region"
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        code = str(info.get("Code", ""))
        message = str(info.get("Message", "")).strip()
        operation = error.operation_name
        if code in MISSING:
            return f"{operation}{where}: {message or 'not found'} ({code}): {MISSING_HINT}"
        if code in REFUSED:
            return f"{operation}{where}: {REFUSED[code]} ({code})"
        return None
    if isinstance(error, ConfigError):
        return f"stage settings: {error}"
    return None
