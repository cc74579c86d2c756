"""`python -m devstack` (what `make dev` runs): the whole system on this machine, no AWS account needed.

Starts the AWS emulator (moto server), provisions it from infra/template.json, verifies the shop's
sending address, loads the demo catalogue, serves a fake Shopify and a fake WooCommerce (devstack/stores.py),
serves the API with Chalice's local server in a child process, and serves the dev console; a background pump
delivers notifier jobs and runs the sweep. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from devstack.stage import REGION, ROOT
from support import stack_state

log = logging.getLogger("devstack")
HOST = "127.0.0.1"
PORTS = ("moto_port", "api_port", "console_port", "woocommerce_port", "shopify_port")


class StartupError(RuntimeError):
    """The stack could not start; the message says what to do."""


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise SystemExit(f"{name} must be a whole number, got {raw!r}") from exc


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options; ports also come from DEVSTACK_*_PORT environment variables."""
    parser = argparse.ArgumentParser(prog="python -m devstack", description="Run the local stack (make dev).")
    parser.add_argument("--moto-port", type=int, default=_env_int("DEVSTACK_MOTO_PORT", 4566))
    parser.add_argument("--api-port", type=int, default=_env_int("DEVSTACK_API_PORT", 8000))
    parser.add_argument("--console-port", type=int, default=_env_int("DEVSTACK_CONSOLE_PORT", 8001))
    parser.add_argument("--woocommerce-port", type=int, default=_env_int("DEVSTACK_WOOCOMMERCE_PORT", 8002))
    parser.add_argument("--shopify-port", type=int, default=_env_int("DEVSTACK_SHOPIFY_PORT", 8003))
    parser.add_argument("--sweep-every", type=float, default=60.0, help="seconds between sweeps (default 60)")
    parser.add_argument(
        "--retry-after", type=int, default=30, help="seconds before a failed notifier job is retried (default 30)"
    )
    parser.add_argument("--no-pump", action="store_true", help="deliver jobs and sweep only from the console")
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=os.environ.get("DEVSTACK_VERBOSE", "").strip().lower() in ("1", "true", "yes"),
        help="also show the emulator's and fake stores' request logs and their tracebacks (make dev VERBOSE=1)",
    )
    args = parser.parse_args(argv)
    for name in PORTS:
        port = getattr(args, name)
        if not 1 <= port <= 65535:
            parser.error(f"--{name.replace('_', '-')} must be a port number, got {port}")
    if len({getattr(args, name) for name in PORTS}) != len(PORTS):
        parser.error("the emulator, API, console and the two fake stores need five different ports")
    return args


# The loggers of the emulator (moto) and of the werkzeug servers it, the console and the fake stores run on.
SERVER_LOGGERS = ("werkzeug", "moto")


def server_logging(*, verbose: bool) -> None:
    """Keep the servers' request logs and tracebacks out of the terminal unless asked for (--verbose).

    werkzeug logs a line per request at INFO and a traceback at ERROR for each request that fails inside
    the emulator; an emulator error already reaches the app as an error answer, which the app reports. The
    console's own failures are logged by the console (logger "devstack.console") and still show.
    """
    for name in SERVER_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.CRITICAL)


def port_free(port: int, host: str = HOST) -> bool:
    """True when nothing listens on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def extra_origins(raw: str) -> list[str]:
    """CORS_ORIGINS from the environment: comma-separated origins (`scheme://host[:port]`), each checked (the app
    refuses a wildcard at start, as it switches off the cross-site form guard)."""
    origins = []
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        parts = urlsplit(entry)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.strip("/") or parts.query:
            raise SystemExit(
                f"CORS_ORIGINS must be origins like https://shop.example or http://localhost:3000, "
                f"comma-separated; got {entry!r}"
            )
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return origins


# Events out (docs/EVENTS.md): a shop tries its receiver against the local stack by setting these for `make dev`.
PASSED_THROUGH = ("OUTBOUND_EVENTS", "OUTBOUND_EVENT_FIELDS", "OUTBOUND_WEBHOOK_URL", "OUTBOUND_WEBHOOK_SECRET")


def api_overrides(
    api_port: int, console_port: int, env: dict[str, str], woocommerce_port: int | None = None
) -> dict[str, str]:
    """Settings that follow the stack's ports, plus the rate limit, events out and extra CORS origins the environment
    sets.

    The console's own origins are always allowed (its storefront embeds the widget); CORS_ORIGINS adds more,
    such as a theme served from your own machine or shop, so the widget can be tried there.
    """
    console = [f"http://{HOST}:{console_port}", f"http://localhost:{console_port}"]
    origins = console + [o for o in extra_origins(env.get("CORS_ORIGINS", "")) if o not in console]
    overrides = {
        "PUBLIC_BASE_URL": f"http://{HOST}:{api_port}",
        "CORS_ORIGINS": ",".join(origins),
        # The demo shop is the console: the pages' "back to the shop" link and logo follow its port.
        "SHOP_URL": f"http://{HOST}:{console_port}/",
        "SHOP_LOGO_URL": f"http://{HOST}:{console_port}/static/logo.svg",
    }
    if woocommerce_port is not None:
        overrides["WOOCOMMERCE_STORE_URL"] = f"http://{HOST}:{woocommerce_port}"
    for name in ("RATE_LIMIT_PER_MINUTE", *PASSED_THROUGH):
        value = env.get(name, "").strip()
        if value:
            overrides[name] = value
    return overrides


class LocalStack:
    """The running pieces, started in order and stopped in reverse."""

    def __init__(self, args: argparse.Namespace, stopping: threading.Event) -> None:
        self.args = args
        self.stopping = stopping
        self.api_base = f"http://{HOST}:{args.api_port}"
        self.console_base = f"http://{HOST}:{args.console_port}"
        self.moto_base = f"http://{HOST}:{args.moto_port}"
        self.shopify_base = f"http://{HOST}:{args.shopify_port}"
        self.woocommerce_base = f"http://{HOST}:{args.woocommerce_port}"
        self.overrides = api_overrides(args.api_port, args.console_port, dict(os.environ), args.woocommerce_port)
        # Where the console publishes the stack clock's offset, and the active platform, for the API process.
        self.clock_file = ROOT / ".devstack" / f"clock.{args.console_port}.json"
        self.platform_file = ROOT / ".devstack" / f"platform.{args.console_port}.json"
        self.moto: Any = None
        self.api_process: subprocess.Popen[str] | None = None
        self.console_server: Any = None
        self.store_servers: list[Any] = []
        self.pump: Any = None
        self.stack: Any = None
        self.feed: Path | None = None

    def _aws_environment(self) -> None:
        # Everything in this process and the API's talks to the emulator, with throwaway credentials.
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            os.environ.pop(name, None)
        os.environ.update(
            {
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
                "AWS_ENDPOINT_URL": self.moto_base,
            }
        )

    def start(self) -> None:
        """Bring everything up; StartupError when a piece cannot start."""
        busy = [p for p in (getattr(self.args, name) for name in PORTS) if not port_free(p)]
        if busy:
            raise StartupError(
                f"Port(s) {', '.join(map(str, busy))} on {HOST} are in use (is another `make dev` running?). "
                "Stop it, or choose others with DEVSTACK_MOTO_PORT / DEVSTACK_API_PORT / DEVSTACK_CONSOLE_PORT / "
                "DEVSTACK_WOOCOMMERCE_PORT / DEVSTACK_SHOPIFY_PORT."
            )
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        self._aws_environment()
        self._start_emulator()
        self._prepare_services()
        self._start_stores()
        self._start_api()
        self._start_console()
        if not self.args.no_pump:
            from devstack.stack import Pump

            self.pump = Pump(self.stack, sweep_every_s=self.args.sweep_every)
            self.pump.start()
        self.stack.api_state = "up"
        # `bisn --stage local` reads the ports from here (support/stack_state.py), however they were chosen.
        stack_state.write(self.state())

    def cors_origins(self) -> list[str]:
        """The origins the API answers cross-site taps from (CORS_ORIGINS as the API process got it)."""
        return [o for o in self.overrides.get("CORS_ORIGINS", "").split(",") if o]

    def state(self) -> stack_state.StackState:
        """This stack as `bisn` reads it: the runner's process and where each piece listens."""
        return stack_state.StackState(
            pid=os.getpid(),
            moto=self.moto_base,
            api=self.api_base,
            console=self.console_base,
            cors_origins=tuple(self.cors_origins()),
        )

    def _start_emulator(self) -> None:
        from moto.server import ThreadedMotoServer

        from devstack import moto_patches

        moto_patches.install(fidelity=True, speed=True)
        self.moto = ThreadedMotoServer(ip_address=HOST, port=self.args.moto_port, verbose=False)
        self.moto.start()
        log.info("AWS emulator (moto) on %s", self.moto_base)

    def _prepare_services(self) -> None:
        import boto3

        from chalicelib import wiring
        from chalicelib.aws import Aws
        from chalicelib.wiring import Services
        from devstack import demo, outbox
        from devstack.fake_model import model_for
        from devstack.provision import provision
        from devstack.stack import ConsoleClock, HttpApi, SharedOffset, SharedPlatform, Stack, verify_sender
        from devstack.staff import staff_pool
        from devstack.stage import local_settings
        from devstack.stores import LocalStores

        # The demo catalogue is the stage's catalogue feed, its checkout URLs pointing at this console.
        feed = self.feed = demo.feed_for(self.console_base)
        self.overrides["CATALOG_URL"] = feed.as_uri()
        session = boto3.session.Session(region_name=REGION)
        # The dashboard's staff pool, and the settings that name it for the API (devstack/staff.py).
        self.overrides.update(staff_pool(session, local_settings(self.overrides).name_prefix, self.moto_base))
        settings = local_settings(self.overrides)
        clock = ConsoleClock(share=SharedOffset(self.clock_file))
        outbox.record_sends(clock)
        created = provision(session, settings.name_prefix)
        log.info("provisioned %d tables, queues and topics from infra/template.json", len(created))
        # The fake stores keep the stack's time, as the app does (a Shopify reservation lapses on that clock).
        stores = LocalStores(settings, now=clock.now, console_base=self.console_base, shopify_url=self.shopify_base)
        services = Services(
            settings,
            aws=Aws(REGION, session=session),
            clock=clock,
            model=model_for(settings),
            transport=stores.transport(),
        )
        wiring.install(services)
        sender = verify_sender(services)
        log.info("verified the sending address %s in the emulator's SES", sender)
        self.stack = Stack(
            services,
            clock,
            HttpApi(self.api_base),
            retry_after_s=self.args.retry_after,
            stores=stores,
            shared_platform=SharedPlatform(self.platform_file),
        )
        skus = demo.load(self.stack, feed)
        log.info("demo catalogue: %s", ", ".join(skus))

    def _start_stores(self) -> None:
        from werkzeug.serving import make_server

        for platform, port, base in (
            ("shopify", self.args.shopify_port, self.shopify_base),
            ("woocommerce", self.args.woocommerce_port, self.woocommerce_base),
        ):
            server = make_server(HOST, port, self.stack.stores.site(platform), threaded=True)
            threading.Thread(target=server.serve_forever, name=f"devstack-{platform}", daemon=True).start()
            self.store_servers.append(server)
            log.info("fake %s store on %s", platform, base)

    def _start_api(self) -> None:
        command = [sys.executable, "-m", "devstack.api", "--host", HOST, "--port", str(self.args.api_port)]
        command += ["--clock-file", str(self.clock_file), "--platform-file", str(self.platform_file)]
        command += ["--shopify-url", self.shopify_base]
        for name, value in self.overrides.items():
            command += ["--set", f"{name}={value}"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # Its own session, so Ctrl-C reaches only this runner, which then stops the API in order.
        self.api_process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        threading.Thread(target=self._relay_api_output, name="devstack-api-log", daemon=True).start()
        deadline = time.monotonic() + 60
        while not self.stack.api.is_up():
            code = self.api_process.poll()
            if code is not None:
                raise StartupError(f"The API (chalice local) exited with code {code} while starting; see above.")
            if self.stopping.is_set():
                raise StartupError("Interrupted while the API was starting.")
            if time.monotonic() > deadline:
                raise StartupError("The API (chalice local) did not answer within 60 seconds.")
            time.sleep(0.2)
        log.info("API (chalice local) on %s", self.api_base)

    def _relay_api_output(self) -> None:
        process = self.api_process
        assert process is not None and process.stdout is not None
        for line in process.stdout:
            print(f"api     | {line.rstrip()}", flush=True)
        code = process.wait()
        if not self.stopping.is_set():
            self.stack.api_state = f"exited (code {code})"
            log.error(
                "The API process (chalice local) exited with code %s. The console stays up; "
                "press Ctrl-C and run `make dev` again to restart it.",
                code,
            )

    def _start_console(self) -> None:
        from werkzeug.serving import make_server

        from devstack.console import create_console

        origins = [self.console_base, f"http://localhost:{self.args.console_port}"]
        app = create_console(self.stack, origins=origins)
        self.console_server = make_server(HOST, self.args.console_port, app, threaded=True)
        threading.Thread(target=self.console_server.serve_forever, name="devstack-console", daemon=True).start()
        log.info("dev console on %s", self.console_base)

    def stop(self) -> None:
        """Stop everything that started, in reverse order (safe to call more than once)."""
        self.stopping.set()
        if self.pump is not None:
            self.pump.stop()
            self.pump = None
        if self.console_server is not None:
            self.console_server.shutdown()
            self.console_server = None
        for server in self.store_servers:
            server.shutdown()
            server.server_close()
        self.store_servers = []
        process, self.api_process = self.api_process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self.moto is not None:
            self.moto.stop()
            self.moto = None
        self.clock_file.unlink(missing_ok=True)
        self.platform_file.unlink(missing_ok=True)
        stack_state.remove(os.getpid())
        from devstack.demo import WORK_DIR

        if self.feed is not None and self.feed.parent == WORK_DIR:
            self.feed.unlink(missing_ok=True)  # the copy made for a console on another port

    def banner(self) -> str:
        """What to open, printed once everything answers."""
        from devstack.staff import DEV_PASSWORD, OWNER_EMAIL, SUPPORT_EMAIL

        return "\n".join(
            [
                "",
                "  Back-in-stock notifier: the local stack is up.",
                f"    Dev console (storefront, outbox, controls):          {self.console_base}",
                f"    API (chalice local, stage local):                    {self.api_base}",
                f"    AWS emulator (moto server):                          {self.moto_base}",
                f"    Fake Shopify (Admin API at /admin/api/…):            {self.shopify_base}",
                f"    Fake WooCommerce (REST API at /wp-json/wc/v3/…):     {self.woocommerce_base}",
                f"    Shop dashboard (demand, restocks, support):          {self.api_base}/admin",
                f"      sign in as {OWNER_EMAIL} (owner) or {SUPPORT_EMAIL} (support), password {DEV_PASSWORD}",
                "  The widget may tap from these origins only (add more with CORS_ORIGINS=…, docs/CONSOLE.md):",
                *(f"    {origin}" for origin in self.cors_origins()),
                f"  `bisn` finds this stack through {stack_state.STATE_FILE.relative_to(ROOT)}.",
                "  Press Ctrl-C to stop.",
                "",
            ]
        )


def main(argv: list[str] | None = None) -> int:
    """Run the stack until Ctrl-C (or SIGTERM); returns the exit code."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)-8s| %(message)s", datefmt="%H:%M:%S")
    # The stack's own story and the app's at INFO; boto's chatter stays quiet.
    for name in ("devstack", "chalicelib"):
        logging.getLogger(name).setLevel(logging.INFO)
    server_logging(verbose=args.verbose)
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    stack = LocalStack(args, stopping)
    code = 0
    try:
        stack.start()
        print(stack.banner(), flush=True)
        while not stopping.wait(0.5):
            pass
        log.info("stopping…")
    except StartupError as error:
        log.error("%s", error)
        code = 1
    finally:
        stack.stop()
    if code == 0:
        log.info("stopped cleanly")
    return code
