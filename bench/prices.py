"""The unit prices every cost figure uses: one table, one date, named sources.

List prices for eu-west-2 (London), on demand, in USD, before tax and without any free tier, as recorded
on 2026-11-30 for docs/DEPLOY.md's cost section. Sources: the AWS pricing pages for Amazon DynamoDB
(on-demand capacity), AWS Lambda (Arm), Amazon API Gateway (REST APIs), Amazon SQS (standard queues),
Amazon SNS (SMS, United Kingdom, transactional), Amazon SES (outbound email), Amazon Bedrock (Anthropic
Claude Haiku 4.5) and AWS Secrets Manager. Check them before relying on a figure: prices change.
"""

from __future__ import annotations

PRICES_AS_OF = "2026-11-30"
REGION = "eu-west-2"

USD = {
    "dynamodb_write_unit": 0.74 / 1_000_000,  # per write request unit
    "dynamodb_read_unit": 0.15 / 1_000_000,  # per read request unit
    "lambda_request": 0.20 / 1_000_000,
    "lambda_gb_second": 0.0000133334,  # Arm
    "api_gateway_request": 3.70 / 1_000_000,  # REST API, first 333 million a month
    "sqs_request": 0.40 / 1_000_000,  # standard queue, per 64 KB request
    "sns_request": 0.50 / 1_000_000,  # API requests other than SMS deliveries
    "sms_uk_segment": 0.040,  # one transactional SMS segment to a UK number (carrier fee included)
    "email": 0.10 / 1_000,  # SES outbound
    "bedrock_input_token": 1.00 / 1_000_000,  # Claude Haiku 4.5
    "bedrock_output_token": 5.00 / 1_000_000,
    "secret_month": 0.40,  # Secrets Manager, per secret per month
    "secret_request": 0.05 / 10_000,
}
