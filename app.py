"""Entry points of the back-in-stock notifier. Each parses input, calls chalicelib, maps errors to HTTP."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from chalice import Chalice, CognitoUserPoolAuthorizer, Rate, Response
from chalice.app import CloudWatchEvent, DynamoDBEvent, Request, SQSEvent

from chalicelib import admin_pages, logs, wiring
from chalicelib.clock import remaining_ms_of
from chalicelib.config import NOTIFIER_MAX_CONCURRENCY
from chalicelib.errors import DomainError, Forbidden, NotFound
from chalicelib.shopper.widget import widget_source
from chalicelib.web import MAX_BODY_BYTES, Headers, cors_headers, cross_site, parse_body, simple_post_allowed
from chalicelib.web.responses import error_response, house_error, json_response, page_response

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from chalicelib.admin.auth import Staff
    from chalicelib.challenge import TurnstileCheck
    from chalicelib.shopper.nojs import FormAnswers

# Every chalicelib logger writes JSON lines at the stage's POWERTOOLS_LOG_LEVEL (chalicelib/logs.py).
logs.configure()

app = Chalice(app_name="bisn")
log = logging.getLogger("chalicelib.api")
app.api.binary_types = []

# JSON is the widget's: a cross-site fetch of it is preflighted, and only CORS_ORIGINS pass. The form and text/plain
# types need no preflight, so they are taken only from an allowed storefront's page or the API's own (by Origin).
FORM_TYPES = ["application/json", "application/x-www-form-urlencoded", "text/plain"]
# RFC 8058 one-click POSTs are multipart/form-data or form-encoded; some clients send text/plain.
UNSUBSCRIBE_TYPES = ["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"]
# A tap on a reserve link: a browser posts the page's form, which has no fields; the body is never read.
RESERVE_TYPES = [*UNSUBSCRIBE_TYPES, "application/json"]

# HTTP belongs here, not to the domain: the status each outcome's kind is answered with (docs/openapi.yaml).
# The keys are the services' outcome kinds, written out so that loading the app imports no service module.
# Every accepted tap gets the same answer, whether the place is new, kept or refused for an opt-out: a caller who
# types someone else's contact learns nothing about that person (README, docs/openapi.yaml).
CAPTURE_STATUS = {"queued": 202, "already_queued": 202, "acknowledged": 202}  # CaptureOutcome.status
# 202 when a restock was recorded, 200 otherwise (the platform must not retry either).
DETECT_STATUS = {"restock": 202, "no_restock": 200, "ignored": 200}  # DetectOutcome.status
RESERVE_STATUS = {  # ReserveOutcome.kind (chalicelib/holds.py)
    "offer": 200,  # opened (GET): the page whose form holds one
    "holding": 200,  # opened (GET) on one's own live hold: the page whose form goes on to checkout
    "held": 303,  # tapped (POST): a unit is now held; see the checkout
    "held_again": 303,  # tapped again on one's own live hold
    "just_gone": 410,  # no unit left; the shopper keeps their place
    "expired": 410,  # lapsed offer, expired hold, used or too-old link
    "invalid": 400,  # tampered, truncated or foreign token
    "unknown": 404,  # a genuine token naming no row
    "unavailable": 409,  # the product has no usable checkout URL; nothing is held
    "store_down": 503,  # held for the shopper, but the store's checkout did not answer: tap again shortly
}
# StoreWebhookOutcome.status (chalicelib/store_webhooks.py): a restock is 202, every other answer 200.
STORE_WEBHOOK_STATUS = {"restock": 202, "no_restock": 200, "orders": 200, "catalog": 200, "ignored": 200}
# Shopify posts JSON; WooCommerce posts JSON, and its ping when a webhook is saved is form-encoded.
STORE_WEBHOOK_TYPES = ["application/json", "application/x-www-form-urlencoded"]


@app.middleware("http")
def refusals_as_json(event: Request, get_response: Callable[[Request], Response]) -> Response:
    """Refusals Chalice makes before a route runs (e.g. 415) answer in the same JSON error shape as ours."""
    return house_error(get_response(event))


def _request() -> Request:
    """The request the running route answers (Chalice sets it before calling a route, and only then)."""
    request = app.current_request
    if request is None:
        raise RuntimeError("no current request: only a route may ask for it")
    return request


def _body(request: Request) -> bytes:
    """The raw body: Chalice always makes it bytes, though it annotates `str | bytes`."""
    body = request.raw_body
    return body if isinstance(body, bytes) else body.encode()


def _source_ip() -> str:
    identity = (_request().context or {}).get("identity") or {}
    return str(identity.get("sourceIp") or "unknown")


def _no_body_for_head(response: Response) -> Response:
    """HEAD answers with the status and headers GET would, and no body (a link's GET changes nothing either)."""
    if _request().method == "HEAD":
        response.body = ""
    return response


def _accept_language() -> str | None:
    """The browser's languages, for a page that knows no place to take the shopper's language from."""
    return _request().headers.get("accept-language")


def _cors() -> Headers:
    origin = _request().headers.get("origin")
    headers = cors_headers(origin, wiring.current().settings.cors_origins)
    if origin and not headers:
        # The browser will hide our answer from the page, so nobody else sees why the widget fails there: a shop
        # whose theme's origin is missing from CORS_ORIGINS finds it here. An origin names a site, not a person.
        log.warning("origin not in CORS_ORIGINS: the browser refuses this answer to the page", extra={"origin": origin})
    return headers


@app.route("/notify-me", methods=["POST"], content_types=FORM_TYPES)
def notify_me() -> Response:
    """A shopper taps Notify me: join the SKU's waiting list. A browser's no-JavaScript form gets a page back."""
    request = _request()
    cors = _cors()
    content_type = request.headers.get("content-type", "")
    accept_language = request.headers.get("accept-language")
    settings = wiring.current().settings
    headers = dict(request.headers)
    data: dict[str, Any] = {}
    as_page = _wants_page(content_type, request.headers.get("accept"))
    try:
        if not content_type.lower().startswith("application/json") and not simple_post_allowed(
            headers, settings.cors_origins, settings.public_base_url
        ):
            raise Forbidden(
                "A form or text/plain post is taken only from the shop's own pages; send JSON from the widget.",
                code="cross_site_form",
            )
        data = parse_body(_body(request), content_type, MAX_BODY_BYTES)
        if settings.turnstile_site_key:
            # A hot drop's human check, before anything is read or written (chalicelib/challenge.py).
            _human_check().verify(data, _source_ip())
        outcome = wiring.current().capture.capture(_source_ip(), data, accept_language)
    except DomainError as error:
        if as_page:
            return page_response(_form_answers().refused(error, data, accept_language))
        return error_response(error, cors)
    status = CAPTURE_STATUS[outcome.status]
    if as_page:
        return page_response(_form_answers().accepted(status, data, accept_language, outcome.confirm_email))
    body = {"status": "received", "channel": outcome.channel, "confirm_email": outcome.confirm_email}
    return json_response(status, body, cors)


def _human_check() -> TurnstileCheck:
    from chalicelib.challenge import TurnstileCheck, hostnames

    services = wiring.current()
    settings = services.settings
    return TurnstileCheck(
        secret=lambda: services.secrets.get("TURNSTILE_SECRET"),
        expected_hostnames=hostnames((*settings.cors_origins, settings.public_base_url)),
    )


def _wants_page(content_type: str, accept: str | None) -> bool:
    """A browser's no-JavaScript form post (form-encoded, asking for HTML) gets a page; other callers keep JSON."""
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/x-www-form-urlencoded" and "text/html" in (accept or "").lower()


def _form_answers() -> FormAnswers:
    from chalicelib.shopper.nojs import FormAnswers

    services = wiring.current()
    return FormAnswers(settings=services.settings, catalog=services.tables.catalog)


@app.route("/notify-me", methods=["OPTIONS"])
def notify_me_preflight() -> Response:
    """CORS preflight for shop storefronts on the allow-list."""
    return Response(body="", status_code=204, headers=_cors())


@app.route("/notify-me/code", methods=["POST"], content_types=["application/json", "application/x-www-form-urlencoded"])
def notify_me_code() -> Response:
    """The code a number that opted out was sent when it tapped again: the right one re-subscribes it and joins."""
    request = _request()
    cors = _cors()
    content_type = request.headers.get("content-type", "")
    services = wiring.current()
    settings = services.settings
    accept = request.headers.get("accept-language")
    # The widget posts JSON; a page without script posts its form, answered with a page.
    as_json = content_type.lower().startswith("application/json")
    if not as_json and not simple_post_allowed(dict(request.headers), settings.cors_origins, settings.public_base_url):
        refused = Forbidden("A form post is taken only from the shop's own pages.", code="cross_site_form")
        return error_response(refused, cors)
    try:
        data = parse_body(_body(request), content_type, MAX_BODY_BYTES)
        outcome = services.resubscribe.check_code(_source_ip(), data, accept)
    except DomainError as error:
        return error_response(error, cors) if as_json else page_response(services.resubscribe.code_page(error, accept))
    if not as_json:
        return page_response(services.resubscribe.code_page(outcome, accept))
    return json_response(200, {"status": "resubscribed"}, cors)


@app.route("/notify-me/code", methods=["OPTIONS"])
def notify_me_code_preflight() -> Response:
    """CORS preflight for the widget's code form."""
    return Response(body="", status_code=204, headers=_cors())


@app.route("/widget.js", methods=["GET"])
def widget() -> Response:
    """The embeddable Notify-me widget."""
    return Response(
        body=widget_source(wiring.current().settings),
        status_code=200,
        headers={"Content-Type": "application/javascript; charset=utf-8", "Cache-Control": "public, max-age=300"},
    )


@app.route("/admin", methods=["GET"])
def admin_page() -> Response:
    """The shop owner's dashboard: a page with no data in it; its script signs in and calls /admin/api."""
    return Response(body=admin_pages.page(), status_code=200, headers=dict(admin_pages.PAGE_HEADERS))


@app.route("/admin/static/{name}", methods=["GET"])
def admin_static(name: str) -> Response:
    """The dashboard's script, chart module or style, by name from an allow-list."""
    found = admin_pages.static_file(name)
    if found is None:
        return error_response(NotFound("There is no dashboard file by that name."))
    body, content_type = found
    headers: Headers = {"Content-Type": content_type, **admin_pages.STATIC_HEADERS}
    return Response(body=body.decode("utf-8"), status_code=200, headers=headers)


@app.route("/webhooks/inventory", methods=["POST"], content_types=["application/json"])
def inventory_webhook() -> Response:
    """The shop platform reports a SKU's stock level (Standard Webhooks signature); a crossing is a restock."""
    request = _request()
    try:
        outcome = wiring.current().detector.handle(_body(request), request.headers)
    except DomainError as error:
        return error_response(error)
    return json_response(DETECT_STATUS[outcome.status], outcome.body())


def _store_webhook(platform: str) -> Response:
    request = _request()
    hooks = wiring.current().store_webhooks
    if not hooks.accepts(platform):
        return error_response(NotFound(f"This stage does not take {platform} webhooks.", code="not_enabled"))
    try:
        outcome = hooks.receive(platform, _body(request), request.headers)
    except DomainError as error:
        return error_response(error)
    return json_response(STORE_WEBHOOK_STATUS[outcome.status], outcome.body())


@app.route("/webhooks/shopify", methods=["POST"], content_types=STORE_WEBHOOK_TYPES)
def shopify_webhook() -> Response:
    """Shopify's own webhooks (X-Shopify-Hmac-Sha256): inventory levels, orders, product changes."""
    return _store_webhook("shopify")


@app.route("/webhooks/woocommerce", methods=["POST"], content_types=STORE_WEBHOOK_TYPES)
def woocommerce_webhook() -> Response:
    """WooCommerce's own webhooks (X-WC-Webhook-Signature): product stock, orders, product deletions."""
    return _store_webhook("woocommerce")


@app.schedule(Rate(15, unit=Rate.MINUTES))
def catalog_sync(event: CloudWatchEvent) -> dict[str, object]:
    """Every 15 minutes: mirror the store's product feed into the catalogue (resuming where the last run stopped)."""
    return wiring.current().catalog_sync.run(remaining_ms=remaining_ms_of(event.context)).as_dict()


# Must equal chalicelib/reconcile.py RECONCILE_EVERY_MIN, the period docs/PLATFORMS.md derives its 15-minute bound
# from. A literal: importing chalicelib.reconcile here would load detection on every cold start
# (tests/unit/test_cold_start.py). tests/integration/test_deploy_template.py packages the app and asserts the
# schedule Chalice makes of this decorator is rate(RECONCILE_EVERY_MIN minutes).
@app.schedule(Rate(5, unit=Rate.MINUTES))
def reconcile(event: CloudWatchEvent) -> dict[str, object]:
    """Every 5 minutes: read the store's level of each SKU somebody waits for; a crossing no webhook reported is a
    restock, found as a webhook would have found it."""
    return wiring.current().reconcile.run(remaining_ms=remaining_ms_of(event.context)).as_dict()


# The decorator needs the queue name as a literal at import time, before any stage's settings are loaded,
# so it is read from the environment here. `make package` (infra/pin_stage.py) then binds the trigger to
# the stack's own JobsQueue, whatever the stage's prefix.
JOBS_QUEUE = os.environ.get("NAME_PREFIX", "bisn") + "-jobs"


# At most NOTIFIER_MAX_CONCURRENCY jobs at once: the account's send rates are shared out among them.
@app.on_sqs_message(queue=JOBS_QUEUE, batch_size=1, maximum_concurrency=NOTIFIER_MAX_CONCURRENCY)
def notifier(event: SQSEvent) -> None:
    """Tell the front of a SKU's waiting list about a restock. Raising returns the job to the queue (DLQ after 5)."""
    services = wiring.current()
    # Chalice annotates the context as a dict, but Lambda passes its context object.
    context = cast("LambdaContext", event.context)
    for record in event:
        # A malformed body raises too: it is retried, then parked in the DLQ intact for a person to look at.
        with logs.correlated(message_id=str(record.to_dict().get("messageId", ""))):
            # Restock jobs share the queue with the messages that owe one send each (chalicelib/queue/messages.py).
            services.handle_message(record.body, context.get_remaining_time_in_millis)


FEEDBACK_QUEUE = os.environ.get("NAME_PREFIX", "bisn") + "-ses-feedback"


@app.on_sqs_message(queue=FEEDBACK_QUEUE, batch_size=10)
def feedback(event: SQSEvent) -> None:
    """SES bounces, complaints and deliveries (through SNS): a hard bounce or a complaint opts the address out.

    Unreadable messages are logged and dropped; an AWS error raises, and the batch comes back (DLQ after 5).
    """
    wiring.current().feedback.handle(record.body for record in event)


# Chalice writes a stream trigger's ARN as given here, which no stage can know before its table exists: `make
# package` (infra/pin_stage.py) binds this trigger to the stack's own AuditTable stream.
AUDIT_STREAM = "arn:aws:dynamodb:eu-west-2:000000000000:table/bisn-audit/stream/bound-at-package"


@app.on_dynamodb_record(stream_arn=AUDIT_STREAM, batch_size=100, maximum_batching_window_in_seconds=1)
def events_feed(event: DynamoDBEvent) -> None:
    """New audit facts: those that are events the shop chose (docs/EVENTS.md) go on the events queue. Raising
    hands the batch over again; an event queued twice keeps its id."""
    wiring.current().event_feed.handle(record.to_dict() for record in event)


EVENTS_QUEUE = os.environ.get("NAME_PREFIX", "bisn") + "-events"


@app.on_sqs_message(queue=EVENTS_QUEUE, batch_size=1)
def outbound(event: SQSEvent) -> None:
    """Deliver one outbound event to the shop's webhook receiver or Klaviyo. A failure raises after setting the
    message's next try (backoff); after 8 attempts it waits in the events DLQ for the dashboard's redrive."""
    services = wiring.current()
    for record in event:
        raw = record.to_dict()
        with logs.correlated(message_id=str(raw.get("messageId", ""))):
            attempt = int(raw.get("attributes", {}).get("ApproximateReceiveCount", 1))
            services.outbound.handle(record.body, receipt_handle=record.receipt_handle, attempt=attempt)


@app.lambda_function(name="sms_feedback")
def sms_feedback(event: dict[str, Any], context: LambdaContext) -> None:
    """SNS's SMS delivery failures, from a CloudWatch Logs subscription on its delivery status log group: a number
    that can never take an SMS is opted out. Unreadable records are logged and dropped; an AWS error raises, and
    Lambda invokes again."""
    wiring.current().sms_feedback.handle(event)


# Every link a message carries (reserve, unsubscribe, my requests) changes nothing when opened: mail and chat
# scanners open links (GET, sometimes HEAD) before the shopper does. Each acts only on its page's POST.


@app.route("/reserve/{token}", methods=["GET", "HEAD"])
@app.route("/r/{token}", methods=["GET", "HEAD"])  # the short form: the offer's own random id
def reserve_page(token: str) -> Response:
    """A notified shopper opens their link: a page whose button holds one. Holds nothing."""
    # Imported here, like every service module (wiring.py): only the API function ever loads it.
    from chalicelib.shopper.pages import reserve_link_page

    services = wiring.current()
    outcome = services.holds.look(token)
    page = reserve_link_page(outcome, RESERVE_STATUS[outcome.kind], services.shop, token, _accept_language())
    return _no_body_for_head(page_response(page))


@app.route("/reserve/{token}", methods=["POST"], content_types=RESERVE_TYPES)
@app.route("/r/{token}", methods=["POST"], content_types=RESERVE_TYPES)
def reserve(token: str) -> Response:
    """The link's page's button: hold one unit and see the checkout (303), or an honest page."""
    from chalicelib.shopper.pages import reserve_link_page, reserve_refused

    services = wiring.current()
    # The token is what a tap needs; this only keeps another site's page from making a visitor's browser spend it.
    if cross_site(_request().headers, services.page_origin):
        return page_response(reserve_refused(403, token, services.shop, _accept_language()))
    outcome = services.holds.reserve(token)
    return page_response(
        reserve_link_page(outcome, RESERVE_STATUS[outcome.kind], services.shop, token, _accept_language())
    )


@app.route("/webhooks/orders", methods=["POST"], content_types=["application/json"])
def orders_webhook() -> Response:
    """The shop platform says a held unit was bought (Standard Webhooks signature)."""
    request = _request()
    try:
        outcome = wiring.current().orders.receive(_body(request), request.headers)
    except DomainError as error:
        return error_response(error)
    return json_response(200, outcome.body())


@app.schedule(Rate(1, unit=Rate.MINUTES))
def sweep(event: CloudWatchEvent) -> dict[str, int]:
    """Every minute: lapse offers, expire holds, return units once, top up, tidy stale places."""
    return wiring.current().sweep.run(remaining_ms=remaining_ms_of(event.context))


@app.route("/unsubscribe/{token}", methods=["GET", "HEAD"])
def unsubscribe_page(token: str) -> Response:
    """An unsubscribe link opened: a confirmation page with a button; changes nothing (mail scanners prefetch)."""
    return _no_body_for_head(page_response(wiring.current().self_service.unsubscribe_form(token, _accept_language())))


def _form_from_another_site() -> Response | None:
    """The honest 403 page for a form of ours posted from another site's page (nothing is read or written), or
    None when the post may go on. A mail provider's one-click POST carries no browser headers, so it goes on."""
    services = wiring.current()
    if not cross_site(_request().headers, services.page_origin):
        return None
    from chalicelib.i18n import negotiate
    from chalicelib.shopper.pages import FORM_CROSS_SITE, shopper_text_page

    return page_response(shopper_text_page(403, FORM_CROSS_SITE, services.shop, negotiate(accept=_accept_language())))


@app.route("/unsubscribe/{token}", methods=["POST"], content_types=UNSUBSCRIBE_TYPES)
def unsubscribe(token: str) -> Response:
    """RFC 8058 one-click (or the page's button): opt out, leave every list, pass live offers on."""
    refused = _form_from_another_site()
    if refused is not None:
        return refused
    request = _request()
    return page_response(
        wiring.current().self_service.unsubscribe(
            token, _body(request), request.headers.get("content-type", ""), _accept_language()
        )
    )


@app.route("/unsubscribe/undo/{token}", methods=["GET", "HEAD"])
def unsubscribe_undo_page(token: str) -> Response:
    """An undo link opened again (back, reload): a page with the Undo button; changes nothing."""
    return _no_body_for_head(page_response(wiring.current().self_service.undo_form(token, _accept_language())))


@app.route("/unsubscribe/undo/{token}", methods=["POST"], content_types=["application/x-www-form-urlencoded"])
def unsubscribe_undo(token: str) -> Response:
    """The done page's Undo: lift that unsubscribe inside its window and rejoin the lists left, at their ends."""
    # A form of ours posted from another site's page changes nothing, on this page as on every shopper page.
    refused = _form_from_another_site()
    if refused is not None:
        return refused
    return page_response(wiring.current().self_service.undo_unsubscribe(token, _accept_language()))


@app.route("/confirm/{token}", methods=["GET", "HEAD"])
def confirm_page(token: str) -> Response:
    """A confirmation email's link opened: a page with a button; changes nothing (mail scanners prefetch)."""
    return _no_body_for_head(page_response(wiring.current().confirm_pages.form(token, _accept_language())))


@app.route("/confirm/{token}", methods=["POST"], content_types=["application/x-www-form-urlencoded"])
def confirm(token: str) -> Response:
    """The confirmation page's button: the email place may now be told about restocks."""
    # Without this a script on any page could confirm an address it typed, for every visitor it has.
    refused = _form_from_another_site()
    if refused is not None:
        return refused
    return page_response(wiring.current().confirm_pages.confirm(token, _accept_language()))


@app.route("/optin/{token}", methods=["GET", "HEAD"])
def optin_page(token: str) -> Response:
    """An opt-in link (made by staff for a person who asked): a page with a button; changes nothing."""
    return _no_body_for_head(page_response(wiring.current().optins.form(token, _accept_language())))


@app.route("/optin/{token}", methods=["POST"], content_types=["application/x-www-form-urlencoded"])
def optin(token: str) -> Response:
    """The opt-in page's button: the person's own opt-out is lifted."""
    services = wiring.current()
    if cross_site(_request().headers, services.page_origin):
        return page_response(services.optins.refused(_accept_language()))
    return page_response(services.optins.confirm(token, _accept_language()))


@app.route("/resubscribe/{link_id}", methods=["GET", "HEAD"])
def resubscribe_page(link_id: str) -> Response:
    """A re-subscribe email's link opened: a page with a button; changes nothing (mail scanners prefetch)."""
    return _no_body_for_head(page_response(wiring.current().resubscribe.form(link_id)))


@app.route("/resubscribe/{link_id}", methods=["POST"], content_types=["application/x-www-form-urlencoded"])
def resubscribe(link_id: str) -> Response:
    """The re-subscribe page's button: the person's own opt-out is lifted and they join the list."""
    services = wiring.current()
    request = _request()
    if cross_site(request.headers, services.page_origin):
        return page_response(services.resubscribe.cross_site(request.headers.get("accept-language")))
    return page_response(services.resubscribe.confirm(link_id))


@app.route("/me/{token}", methods=["GET", "HEAD"])
@app.route("/m/{token}", methods=["GET", "HEAD"])  # the short form an SMS carries: a random manage id
def my_requests(token: str) -> Response:
    """A shopper's own page: what they wait for and their place in each line; changes nothing."""
    params: Mapping[str, str] = _request().query_params or {}
    done = params.get("done")
    # An SMS's "Stop texts" link (chalicelib/messages/compose.py STOP_QUERY): the page opens on stopping.
    stop_first = "stop" in params
    page = wiring.current().self_service.manage_page(token, done, _accept_language(), stop_first=stop_first)
    return _no_body_for_head(page_response(page))


@app.route("/me/{token}", methods=["POST"], content_types=["application/x-www-form-urlencoded"])
@app.route("/m/{token}", methods=["POST"], content_types=["application/x-www-form-urlencoded"])
def change_my_requests(token: str) -> Response:
    """A form on the shopper's page: leave a list, switch channel, or stop everything (CSRF-checked)."""
    # Refused before the link is looked up: another site's page learns nothing about a link, good or bad.
    refused = _form_from_another_site()
    if refused is not None:
        return refused
    request = _request()
    answer = wiring.current().self_service.manage_action(
        token,
        _body(request),
        request.headers.get("content-type", ""),
        _accept_language(),
        source=_source_ip(),
    )
    return page_response(answer)


# --- The shop's dashboard JSON API (docs/ADMIN.md, docs/openapi.yaml). Every route but sign-in checks the staff
# member's Cognito id token itself (chalicelib/admin/auth.py), in every stage. A packaged stage also puts API
# Gateway's Cognito user-pool authorizer in front: `make package` sets ADMIN_AUTHORIZER=cognito, and
# infra/pin_stage.py binds it to the template's AdminUserPool. Locally Chalice would only decode a token's
# claims unverified, so there the app's own check is the one that protects.
ADMIN_AUTHORIZER = (
    CognitoUserPoolAuthorizer(
        "AdminUserPool", provider_arns=["arn:aws:cognito-idp:eu-west-2:000000000000:userpool/bound-at-package"]
    )
    if os.environ.get("ADMIN_AUTHORIZER") == "cognito"
    else None
)
ADMIN_TYPES = ["application/json"]
CSV_TYPE = "text/csv; charset=utf-8"


def _params() -> Mapping[str, str]:
    return _request().query_params or {}


def _admin_json(produce: Callable[[], dict[str, object]], csv_table: str | None = None) -> Response:
    """A dashboard answer (JSON, or one of its lists as CSV with ?format=csv), errors in the house shape."""
    try:
        answer = produce()
    except DomainError as error:
        return error_response(error, {"Cache-Control": "no-store"})
    if csv_table is not None and _params().get("format") == "csv":
        from chalicelib.admin.api import csv_of

        return Response(
            body=csv_of(csv_table, answer),
            status_code=200,
            headers={
                "Content-Type": CSV_TYPE,
                "Content-Disposition": f'attachment; filename="{csv_table}.csv"',
                "Cache-Control": "no-store",
            },
        )
    return json_response(200, answer, {"Cache-Control": "no-store"})


def _staff_json(produce: Callable[[Staff], dict[str, object]], csv_table: str | None = None) -> Response:
    """As `_admin_json`, for a signed-in staff member (`produce` gets them)."""
    admin = wiring.current().admin

    def run() -> dict[str, object]:
        staff = admin.staff(_request().headers.get("authorization"))
        return produce(staff)

    return _admin_json(run, csv_table)


def _admin_body() -> dict[str, object]:
    request = _request()
    return parse_body(_body(request), request.headers.get("content-type", ""), MAX_BODY_BYTES)


@app.route("/admin/api/session", methods=["POST"], content_types=ADMIN_TYPES)
def admin_sign_in() -> Response:
    """Staff sign-in: email and password (Cognito USER_PASSWORD_AUTH); an id token or a further challenge."""
    return _admin_json(lambda: wiring.current().admin.sign_in_start(_admin_body()))


@app.route("/admin/api/session/challenge", methods=["POST"], content_types=ADMIN_TYPES)
def admin_sign_in_challenge() -> Response:
    """Staff sign-in's next step: a new password, or a code from an authenticator app."""
    return _admin_json(lambda: wiring.current().admin.sign_in_answer(_admin_body()))


@app.route("/admin/api/me", methods=["GET"], authorizer=ADMIN_AUTHORIZER)
def admin_me() -> Response:
    """Who is signed in, and their role."""
    return _staff_json(lambda staff: wiring.current().admin.me(staff))


@app.route("/admin/api/demand", methods=["GET"], authorizer=ADMIN_AUTHORIZER)
def admin_demand() -> Response:
    """Most-wanted out-of-stock products, and joins per day, for a period."""
    return _staff_json(lambda staff: wiring.current().admin.demand(_params()), "demand")


@app.route("/admin/api/restocks", methods=["GET"], authorizer=ADMIN_AUTHORIZER)
def admin_restocks() -> Response:
    """Restocks opened in a period, each with its funnel, and conversion by channel."""
    return _staff_json(lambda staff: wiring.current().admin.restocks(_params()), "restocks")


@app.route("/admin/api/restocks/{restock_id}", methods=["GET"], authorizer=ADMIN_AUTHORIZER)
def admin_restock(restock_id: str) -> Response:
    """One restock with its funnel stages."""
    return _staff_json(lambda staff: wiring.current().admin.restock(restock_id, _params()), "restock")


@app.route("/admin/api/waiting/{sku}", methods=["GET"], authorizer=ADMIN_AUTHORIZER)
def admin_waiting(sku: str) -> Response:
    """A page of a SKU's waiting list, contacts masked."""
    return _staff_json(lambda staff: wiring.current().admin.waiting(sku, _params()), "waiting")


@app.route("/admin/api/waiting/{sku}/remove", methods=["POST"], content_types=ADMIN_TYPES, authorizer=ADMIN_AUTHORIZER)
def admin_waiting_remove(sku: str) -> Response:
    """Take one place off a SKU's list (audited)."""
    return _staff_json(lambda staff: wiring.current().admin.remove(staff, sku, _admin_body()))


@app.route(
    "/admin/api/products/{sku}/backorder", methods=["POST"], content_types=ADMIN_TYPES, authorizer=ADMIN_AUTHORIZER
)
def admin_product_backorder(sku: str) -> Response:
    """What the widget offers for a product sold on backorder: notify-me, a pre-order note or nothing (audited)."""
    return _staff_json(lambda staff: wiring.current().admin.backorder(staff, sku, _admin_body()))


@app.route("/admin/api/operations", methods=["GET"], authorizer=ADMIN_AUTHORIZER)
def admin_operations() -> Response:
    """Dead letters, failed and refused sends, alarms, SMS spend."""
    return _staff_json(lambda staff: wiring.current().admin.operations_view(), "alarms")


@app.route("/admin/api/operations/events", methods=["GET"], authorizer=ADMIN_AUTHORIZER)
def admin_dead_events() -> Response:
    """Outbound events waiting in their dead-letter queue (up to 10 listed), persons never named."""
    return _staff_json(lambda staff: wiring.current().admin.dead_events(), "dead_events")


@app.route("/admin/api/operations/redrive", methods=["POST"], content_types=ADMIN_TYPES, authorizer=ADMIN_AUTHORIZER)
def admin_redrive() -> Response:
    """Move the job queue's dead letters, or the outbound events', back to their queue (audited)."""
    return _staff_json(lambda staff: wiring.current().admin.redrive(staff, _admin_body()))


@app.route("/admin/api/imports", methods=["POST"], content_types=["text/csv"], authorizer=ADMIN_AUTHORIZER)
def admin_import() -> Response:
    """Import a waiting list exported by another app (docs/IMPORT.md): the CSV is the body, ?format= names it."""
    return _staff_json(lambda staff: wiring.current().admin.import_list(staff, _body(_request()), _params()))


# Support: the contact is typed in full and travels only in a POST body, never in a URL.


@app.route("/admin/api/contacts/explain", methods=["POST"], content_types=ADMIN_TYPES, authorizer=ADMIN_AUTHORIZER)
def admin_contact_explain() -> Response:
    """Every place a person has and every decision about them (`bisn explain`)."""
    return _staff_json(lambda staff: wiring.current().admin.explain(staff, _admin_body()))


@app.route("/admin/api/contacts/optout", methods=["POST"], content_types=ADMIN_TYPES, authorizer=ADMIN_AUTHORIZER)
def admin_contact_optout() -> Response:
    """Opt a person out and take them off every list (audited)."""
    return _staff_json(lambda staff: wiring.current().admin.opt_out(staff, _admin_body()))


@app.route("/admin/api/contacts/optin", methods=["POST"], content_types=ADMIN_TYPES, authorizer=ADMIN_AUTHORIZER)
def admin_contact_optin() -> Response:
    """Ask an opted-out person whether they want messages again: only their own confirmation lifts it (audited)."""
    return _staff_json(lambda staff: wiring.current().admin.opt_in(staff, _admin_body()))


@app.route("/admin/api/contacts/export", methods=["POST"], content_types=ADMIN_TYPES, authorizer=ADMIN_AUTHORIZER)
def admin_contact_export() -> Response:
    """Everything held about a person (owner only; audited)."""
    return _staff_json(lambda staff: wiring.current().admin.export(staff, _admin_body()))


@app.route("/admin/api/contacts/forget", methods=["POST"], content_types=ADMIN_TYPES, authorizer=ADMIN_AUTHORIZER)
def admin_contact_forget() -> Response:
    """Erase a person (owner only, with `confirm: true`; audited)."""
    return _staff_json(lambda staff: wiring.current().admin.forget(staff, _admin_body()))


# --- Dead ends. API Gateway hands a path to the most specific resource that matches, so `/{proxy+}` gets only what
# no route above takes (`/` is not under it). Without these, API Gateway answers an unknown path with its own 403
# "Missing Authentication Token". Locally, `chalice local` and the test client match `{proxy+}` against one path
# segment only; devstack/greedy_routes.py makes them match as API Gateway does.
DEAD_END_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


@app.route("/", methods=DEAD_END_METHODS, content_types=["*/*"])
@app.route("/{proxy+}", methods=DEAD_END_METHODS, content_types=["*/*"])
def not_found() -> Response:
    """Any address no route serves: the shop's 404 page for a browser, a JSON 404 for a program."""
    from chalicelib.web.not_found import not_found as answer

    request = _request()
    params = request.uri_params or {}
    # API Gateway names the greedy parameter `proxy`; Chalice's local gateway keeps the `+`.
    path = params.get("proxy") or params.get("proxy+") or ""
    response = answer(path, request.method, request.headers.get("accept"), wiring.current().shop, _accept_language())
    return _no_body_for_head(response)
