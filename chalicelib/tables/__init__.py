"""One class per DynamoDB table, each built around an injected boto3 Table resource."""
