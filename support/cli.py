"""`bisn`: answer "why was I (not) told?", see demand, and honour shoppers' data requests.

A thin click layer over chalicelib/support_desk.py. It runs against a deployed stage with your own AWS
credentials (`--stage prod`: names and secrets come from .chalice/config.json and Secrets Manager), or
against the local emulator (`--stage local`, the default: the running `make dev` stack's, read from the state
file it writes, support/stack_state.py; or any `--endpoint-url` / AWS_ENDPOINT_URL). The endpoint used is
named on stderr.

Failures of the surroundings (no credentials, the emulator not running, a table missing) are one line on
stderr and exit code 1 (support/failures.py); long operations report progress on stderr (support/progress.py).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from chalicelib.clock import iso
from chalicelib.config import ConfigError, settings_from_env
from chalicelib.errors import DomainError
from chalicelib.line import PlaceInLine
from chalicelib.support_desk import Explanation, QueueRow, SupportDesk
from infra.stages import UnknownStage, stage_env
from support import lift, stack_state
from support.failures import describe
from support.progress import Progress

if TYPE_CHECKING:
    from chalicelib.importer import ImportReport, ImportService
    from chalicelib.wiring import Services

LOCAL_REGION = "eu-west-2"
# How often a long operation reports progress when stderr is not a terminal.
QUEUE_PROGRESS_EVERY = 1000
REDRIVE_PROGRESS_EVERY = 100
IMPORT_PROGRESS_EVERY = 500
IMPORT_FORMATS = ("klaviyo", "cwginstock", "woo-waitlist", "generic")
# On a terminal, progress shows once this many items are done: a short answer comes without it.
LIVE_FROM = 100
F = TypeVar("F", bound=Callable[..., Any])


# A phone number as shoppers write one: digits with spaces, dots, dashes, brackets, a leading +.
PHONE_SHAPE = re.compile(r"\+?[\d\s().-]+")
PHONE_WORD = re.compile(r"[+\d\s().-]*\d[\d\s().-]*")
MIN_PHONE_DIGITS = 6


@dataclass(frozen=True)
class Endpoint:
    """Where this run's AWS clients go (None: AWS itself), and why there."""

    url: str | None
    source: str


def endpoint_for(stage: str, endpoint_url: str | None, state_file: Path | None = None) -> Endpoint:
    """The option, AWS_ENDPOINT_URL, or for the local stage the running stack's emulator (its state file), else
    the default port (DEVSTACK_MOTO_PORT or 4566)."""
    if endpoint_url:
        return Endpoint(endpoint_url, "--endpoint-url")
    if os.environ.get("AWS_ENDPOINT_URL"):
        return Endpoint(os.environ["AWS_ENDPOINT_URL"], "AWS_ENDPOINT_URL")
    if stage != "local":
        return Endpoint(None, f"stage {stage}")
    running = stack_state.read(state_file) if state_file is not None else stack_state.read()
    if running is not None:
        return Endpoint(running.moto, f"the running stack, {_shown(state_file or stack_state.STATE_FILE)}")
    port = os.environ.get("DEVSTACK_MOTO_PORT")
    if port:
        return Endpoint(f"http://127.0.0.1:{port}", "DEVSTACK_MOTO_PORT; no running stack found")
    return Endpoint("http://127.0.0.1:4566", "the default; no running stack found")


def _shown(path: Path) -> str:
    try:
        return str(os.path.relpath(path))
    except ValueError:
        return str(path)


def check_contact(raw: str) -> str:
    """A contact as staff typed it, refused at once (before any AWS call) when it is neither an email address nor
    something a phone number could be; the desk then reads and normalises it as capture does."""
    text = raw.strip()
    digits = sum(ch.isdigit() for ch in text)
    if "@" in text or (PHONE_SHAPE.fullmatch(text) and digits >= MIN_PHONE_DIGITS):
        return text
    raise click.UsageError(f"{raw!r} is not an email or a phone number")


class ContactType(click.ParamType):
    name = "contact"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return check_contact(str(value))
        except click.UsageError as error:
            self.fail(error.message, param, ctx)


CONTACT = ContactType()


def split_contact_and_sku(words: Sequence[str], known_sku: Callable[[str], bool]) -> tuple[str, str | None]:
    """`explain`'s words, in either order, as (contact, SKU or None): a phone number may come unquoted, in as many
    words as it was written in. The SKU is the word that cannot be part of a phone number (or, for an all-digit SKU,
    the first or last word the catalogue knows)."""
    if not words:
        raise click.UsageError("name a contact (an email or a phone number), and optionally a SKU")
    emails = [i for i, w in enumerate(words) if "@" in w]
    if emails:
        rest = [w for i, w in enumerate(words) if i != emails[0]]
        if len(rest) > 1:
            raise click.UsageError(f"expected CONTACT [SKU], got {len(words)} words: {' '.join(words)}")
        return check_contact(words[emails[0]]), (rest[0] if rest else None)
    others = [i for i, w in enumerate(words) if not PHONE_WORD.fullmatch(w)]
    if not others:
        for at in (0, len(words) - 1) if len(words) > 1 else ():
            if known_sku(words[at]):
                return check_contact(" ".join(w for i, w in enumerate(words) if i != at)), words[at]
        return check_contact(" ".join(words)), None
    known = [i for i in others if known_sku(words[i])]
    at = known[0] if known else (others[0] if others[0] in (0, len(words) - 1) else others[-1])
    rest = [w for i, w in enumerate(words) if i != at]
    if not rest:
        raise click.UsageError(f"{words[at]!r} is not an email or a phone number")
    return check_contact(" ".join(rest)), words[at]


def build_desk(stage: str, endpoint_url: str | None, region: str | None) -> tuple[SupportDesk, bool]:
    """The support desk for a stage, and whether it talks to an emulator rather than AWS."""
    services, emulated = build_services(stage, endpoint_url, region)
    return services.desk, emulated


def build_services(stage: str, endpoint_url: str | None, region: str | None) -> tuple[Services, bool]:
    """A stage's services, and whether they talk to an emulator rather than AWS."""
    import boto3

    from chalicelib.aws import Aws
    from chalicelib.wiring import Services

    endpoint = endpoint_for(stage, endpoint_url).url
    if endpoint:
        # boto3 sends every client to AWS_ENDPOINT_URL; the emulator accepts any credentials.
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    session = boto3.session.Session(region_name=region) if region else boto3.session.Session()
    chosen = region or session.region_name or (LOCAL_REGION if endpoint else None)
    if not chosen:
        raise click.UsageError("no AWS region: pass --region or set AWS_REGION")
    try:
        settings = settings_from_env({**stage_env(stage), "AWS_REGION": chosen})
    except (ConfigError, UnknownStage) as exc:
        raise click.UsageError(str(exc)) from exc
    services = Services(settings, aws=Aws(chosen, session=boto3.session.Session(region_name=chosen)))
    return services, bool(endpoint)


def _desk(ctx: click.Context) -> SupportDesk:
    obj = ctx.obj
    if obj.get("desk") is None:
        chosen = endpoint_for(obj["stage"], obj["endpoint_url"])
        obj["endpoint"] = chosen.url
        # On stderr, so stdout stays the answer (and --json parses).
        click.echo(f"Using {chosen.url or 'AWS'} ({chosen.source})", err=True)
        obj["desk"], obj["emulated"] = build_desk(obj["stage"], obj["endpoint_url"], obj["region"])
    return obj["desk"]


def _emit(ctx: click.Context, data: Any, text: str) -> None:
    if ctx.obj.get("json"):
        click.echo(json.dumps(_plain(data), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        click.echo(text)


def _plain(data: Any) -> Any:
    if is_dataclass(data) and not isinstance(data, type):
        return asdict(data)
    if isinstance(data, list):
        return [_plain(d) for d in data]
    return data


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(dict)["json"] = True


def json_option(command: F) -> F:
    """`--json` on a subcommand too (`bisn queue SKU --json`), meaning the same as before it."""
    option = click.option(
        "--json", is_flag=True, expose_value=False, callback=_set_json, help="Machine-readable output."
    )
    return option(command)


def _progress(ctx: click.Context, label: str, every: int, total: int | None = None) -> Progress:
    stream = ctx.obj.get("progress_stream") or sys.stderr
    return Progress(label, stream, every=every, total=total, live_from=LIVE_FROM)


class DeskGroup(click.Group):
    """Turns refusals and infrastructure failures into one clear line and exit code 1 instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DomainError as error:
            raise click.ClickException(f"{error.message} ({error.code})") from error
        except Exception as error:
            obj = ctx.obj if isinstance(ctx.obj, dict) else {}
            line = describe(error, endpoint=obj.get("endpoint"))
            if line is None:
                raise
            raise click.ClickException(line) from error


@click.group(cls=DeskGroup)
@click.option("--stage", default="local", show_default=True, help="Stage in .chalice/config.json.")
@click.option("--endpoint-url", default=None, help="AWS endpoint (the local emulator; default for --stage local).")
@click.option("--region", default=None, help="AWS region (default: AWS_REGION, your profile, or eu-west-2 locally).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def cli(ctx: click.Context, stage: str, endpoint_url: str | None, region: str | None, as_json: bool) -> None:
    """Support tools for the back-in-stock notifier."""
    # Tests pass a ready desk in obj; otherwise it is built on first use from the options.
    given = ctx.obj if isinstance(ctx.obj, dict) else {}
    ctx.obj = {
        "desk": given.get("desk"),
        "emulated": given.get("emulated", False),
        "stage": stage,
        "endpoint_url": endpoint_url,
        "region": region,
        "json": as_json,
        "progress_stream": given.get("progress_stream"),
        "importer": given.get("importer"),
    }


@cli.command()
@click.argument("words", nargs=-1, required=True, metavar="CONTACT [SKU]")
@click.option("--lookback-days", default=30, show_default=True, help="Also show restocks this long before joining.")
@json_option
@click.pass_context
def explain(ctx: click.Context, words: tuple[str, ...], lookback_days: int) -> None:
    """Their place in SKU's line, and each restock: told, or why not. Without a SKU, every line they are on or
    were on. CONTACT and SKU go in either order; a phone number may be typed with spaces, quoted or not."""
    desk = _desk(ctx)
    contact, sku = split_contact_and_sku(words, lambda word: desk.tables.catalog.get(word) is not None)
    if sku is not None:
        found = desk.explain(sku, contact, lookback_days=lookback_days)
        _emit(ctx, found, render_explanation(found))
        return
    every = desk.explain_all(contact, lookback_days=lookback_days)
    text = "\n\n".join(map(render_explanation, every)) or "They have no place and no history on any list."
    _emit(ctx, every, text)


def place_figure(place: PlaceInLine) -> str:
    """A place as staff read it: "4", or "3-5 (a range: people ahead left or bought since they joined)"."""
    if place.exact is not None:
        return str(place.exact)
    return f"{place.lowest}-{place.highest} (a range: people ahead left or bought since they joined)"


def render_explanation(e: Explanation) -> str:
    """The explanation as support staff read it."""
    lines = [f"{e.contact} · {e.product} ({e.sku})"]
    if e.state is None:
        lines.append("Place: none (not on this list now)")
    elif e.place is not None:
        lines.append(f"Place: {place_figure(e.place)} in line, {e.state}, joined {(e.joined_ts or '')[:19]}Z")
    else:
        lines.append(f"Place: {e.state}, joined {(e.joined_ts or '')[:19]}Z")
    if e.opted_out:
        lines.append(f"Opted out: yes ({e.opted_out.get('source')}, {iso(int(e.opted_out.get('at', 0)))[:19]}Z)")
    else:
        lines.append("Opted out: no")
    lines += [f"History: {h}" for h in e.history]
    if not e.restocks:
        lines.append("Restocks: none in this period")
    for r in e.restocks:
        lines.append(f"- {r.restock_ts[:19]}Z {r.restock_id} ({r.units_total} units): {r.verdict} — {r.detail}")
        lines += [f"    then {f}" for f in r.follow_ups]
    return "\n".join(lines)


@cli.command()
@click.argument("sku")
@click.option("--limit", default=50, show_default=True, help="At most this many places; 0 for the whole list.")
@json_option
@click.pass_context
def queue(ctx: click.Context, sku: str, limit: int) -> None:
    """SKU's waiting list in order (contacts masked)."""
    if limit < 0:
        raise click.BadParameter("must be 0 (the whole list) or more", param_hint="--limit")
    progress = _progress(ctx, f"Read {sku}'s list", QUEUE_PROGRESS_EVERY)
    try:
        rows = _desk(ctx).queue(sku, limit=limit or None, progress=progress)
    finally:
        progress.finish()
    _emit(ctx, rows, render_queue(sku, rows))


UNCONFIRMED_NOTE = (
    "Not confirmed yet (email places whose address has not confirmed them): every restock passes them over until "
    "it does, so someone lower in line can be told first. They keep their place and are told of a later restock "
    "once confirmed (or of this one, if it still has units then)."
)


def render_queue(sku: str, rows: list[QueueRow]) -> str:
    """The list in order, the places a restock would tell first; unconfirmed email places apart, below, with their
    numbers in the list, so a shopper further down being told first is explained."""
    if not rows:
        return f"Nobody is waiting for {sku}."

    def line(r: QueueRow) -> str:
        told = f"  last told: {r.last_notified_restock}" if r.last_notified_restock else ""
        return f"{r.position:>4}  {r.joined_ts[:19]}Z  {r.state:<9} {r.channel:<5} {r.contact}{told}"

    header = f"{'#':>4}  {'joined':<20}  {'state':<9} {'via':<5} contact"
    confirmed = [line(r) for r in rows if r.confirmed]
    pending = [line(r) for r in rows if not r.confirmed]
    lines = [header, *confirmed] if confirmed else [header, "   (no confirmed places among these)"]
    if pending:
        lines += ["", UNCONFIRMED_NOTE, header, *pending]
    return "\n".join(lines)


@cli.command()
@click.option("--limit", default=20, show_default=True)
@json_option
@click.pass_context
def demand(ctx: click.Context, limit: int) -> None:
    """Out-of-stock products ranked by people waiting."""
    rows = _desk(ctx).demand(limit=limit)
    text = "\n".join(
        f"{r.waiting:>7}  {r.sku:<24} {r.name}" + (f"  (level {r.level})" if r.level is not None else "") for r in rows
    )
    header = f"{'waiting':>7}  {'sku':<24} product\n"
    _emit(ctx, rows, (header + text) if rows else "No out-of-stock products.")


@cli.group()
def optout() -> None:
    """Add or lift an opt-out on a shopper's request."""


@optout.command("add")
@click.argument("contact", type=CONTACT)
@json_option
@click.pass_context
def optout_add(ctx: click.Context, contact: str) -> None:
    """Never queue or message CONTACT again; take them off every list."""
    result = _desk(ctx).optout_add(contact)
    lines = ["Opted out." if result.newly else "Already opted out (the first reason is kept)."]
    lines += [f"Left {e.sku} ({e.outcome})" for e in result.left]
    lines += [
        f"Still holding {e.sku} until {iso(e.hold_expires_at or 0)}: theirs until it ends" for e in result.holding
    ]
    _emit(ctx, {"newly": result.newly, "exits": _plain(result.exits)}, "\n".join(lines))


@optout.command("remove")
@click.argument("contact", type=CONTACT)
@json_option
@click.pass_context
def optout_remove(ctx: click.Context, contact: str) -> None:
    """Lift CONTACT's opt-out (they may join lists again)."""
    result = lift.optout_remove(_desk(ctx), contact)
    lines = ["Opt-out lifted." if result.removed else "There was no opt-out for this contact."]
    if result.sms_still_opted_out:
        lines.append(
            "SNS still blocks this number (they replied STOP), so the next sync suppresses it again. "
            "They can text START (or staff can opt the number in once in 30 days with SNS OptInPhoneNumber)."
        )
    _emit(ctx, result, "\n".join(lines))


@cli.command()
@click.argument("contact", type=CONTACT)
@json_option
@click.pass_context
def export(ctx: click.Context, contact: str) -> None:
    """Everything held about CONTACT, as JSON."""
    data = _desk(ctx).export(contact)
    click.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


@cli.command()
@click.argument("contact", type=CONTACT)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def forget(ctx: click.Context, contact: str, yes: bool) -> None:
    """Erase CONTACT's places and personal data, and unlink their audit facts (an opt-out stays, as a keyed hash)."""
    if not yes:
        click.confirm(f"Erase everything about {contact}? This cannot be undone", abort=True)
    report = _desk(ctx).forget(contact)
    lines = [
        f"Erased {report.requests_erased} request(s) and {report.uniqueness_items_erased} uniqueness item(s); "
        f"{report.offers_released} live offer(s) passed to the next person.",
        "Kept: their opt-out, as a keyed hash, so they stay suppressed."
        if report.kept_optout
        else "No opt-out was on record, so nothing about them is kept.",
        f"Took their keyed hash off {report.audit_facts_anonymised} audit fact(s); the facts stay, naming nobody, "
        "until they expire.",
    ]
    if report.remaining:
        lines.append(f"Warning: {report.remaining} item(s) still found (the index may lag); run forget again.")
    _emit(ctx, report, "\n".join(lines))


@cli.group()
def dlq() -> None:
    """The notifier's dead-letter queue."""


@dlq.command()
@click.option("--wait", is_flag=True, help="On AWS, follow the move task to its end, showing progress.")
@json_option
@click.pass_context
def redrive(ctx: click.Context, wait: bool) -> None:
    """Move dead-lettered jobs back to the job queue."""
    desk = _desk(ctx)
    progress = _progress(ctx, "Moved", REDRIVE_PROGRESS_EVERY)
    try:
        report = desk.dlq_redrive(emulated=bool(ctx.obj.get("emulated")), progress=progress)
        if wait and report.task_handle:
            report = desk.follow_move_task(report, progress)
    finally:
        progress.finish()
    lines = [f"{report.waiting_before} job(s) were dead-lettered.", f"Method: {report.method}"]
    if report.moved is not None:
        lines.append(f"Moved {report.moved} job(s) to {report.destination}.")
    if report.failed:
        lines.append(f"{report.failed} job(s) could not be sent and stay dead-lettered; run redrive again.")
    if report.task_handle:
        lines.append(f"Task: {report.task_handle}")
    if report.status:
        lines.append(f"Status: {report.status}")
    if report.note:
        lines.append(report.note)
    _emit(ctx, report, "\n".join(lines))


def _importer(ctx: click.Context) -> ImportService:
    obj = ctx.obj
    if obj.get("importer") is None:
        chosen = endpoint_for(obj["stage"], obj["endpoint_url"])
        obj["endpoint"] = chosen.url
        click.echo(f"Using {chosen.url or 'AWS'} ({chosen.source})", err=True)
        services, obj["emulated"] = build_services(obj["stage"], obj["endpoint_url"], obj["region"])
        obj["importer"] = services.imports
    return obj["importer"]


@cli.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "format_name", type=click.Choice(IMPORT_FORMATS), required=True, help="Whose export.")
@click.option("--dry-run", is_flag=True, help="Check every row against the catalogue and the lists; write nothing.")
@json_option
@click.pass_context
def import_list(ctx: click.Context, file: Path, format_name: str, dry_run: bool) -> None:
    """Put the people of another app's waiting-list export on our lists, each at their original join time
    (docs/IMPORT.md). Rows not imported are listed with their line and why; running it again imports nothing twice
    and finishes a run that stopped midway."""
    try:
        text = file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise click.UsageError(f"{file} is not UTF-8 text") from error
    importer = _importer(ctx)
    rows = max(0, text.count("\n") - 1) or None
    progress = _progress(ctx, "Rows handled", IMPORT_PROGRESS_EVERY, rows)
    try:
        report = importer.run(text, format_name, dry_run=dry_run, progress=progress, source="bisn import")
    finally:
        progress.finish()
    _emit(ctx, report.body(), render_import(report))


def render_import(report: ImportReport) -> str:
    """The report as staff read it: the counts, then each row not imported with its line."""
    verb = "Would import" if report.dry_run else "Imported"
    lines = [
        f"{verb} {report.imported:,} of {report.rows:,} row(s) ({report.format}).",
        f"{report.confirmations_owed:,} email place(s) owe a confirmation email (double opt-in)."
        if report.confirmations_owed
        else "No place owes a confirmation email.",
    ]
    if report.already:
        lines.append(f"Already on the list: {len(report.already):,} row(s) (lines {_lines(report.already)}).")
    if report.refused:
        lines.append(f"Refused: {len(report.refused):,} row(s):")
        lines += [f"  line {r.line}: {r.reason}" for r in report.refused]
    return "\n".join(lines)


def _lines(rows: Sequence[Any]) -> str:
    shown = ", ".join(str(r.line) for r in rows[:20])
    return shown + (f" and {len(rows) - 20} more" if len(rows) > 20 else "")


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="bisn")
