"""Serves the API with Chalice's local server, as `chalice local --stage local --no-autoreload` does.

`chalice local` puts the stage's variables from .chalice/config.json over the environment, so a
RATE_LIMIT_PER_MINUTE given to `make dev`, or the address of a stack on other ports, would be lost.
This runs the same server and applies the stack's `--set NAME=VALUE` overrides after Chalice has
loaded its stage, and before the first request (the app reads its settings on first use). With
`--clock-file` the app runs on the stack clock, whose offset the console publishes in that file; with
`--platform-file` it runs on the store platform the console last chose (its services are rebuilt when that
changes), reaching the fake Shopify served at `--shopify-url` (devstack/stores.py).

    python -m devstack.api --port 8000 --set RATE_LIMIT_PER_MINUTE=600
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from chalice import Chalice, local
from chalice.cli import create_local_server
from chalice.cli.factory import CLIFactory
from chalice.config import Config
from chalice.local import LocalDevServer

from devstack import greedy_routes
from devstack.stage import ROOT

if TYPE_CHECKING:
    from chalicelib.wiring import Services
    from devstack.stack import SharedPlatform


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """NAME=VALUE pairs as a dict; ValueError for anything else."""
    overrides = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--set takes NAME=VALUE, got {pair!r}")
        overrides[name] = value
    return overrides


# Connections the kernel holds for the server while its threads are busy. Chalice's local server keeps
# http.server's 5, so a burst of taps from a load test or a busy page (16 at once) overflowed it and some
# were refused or reset; the emulator's and the console's werkzeug servers already wait for 128.
LISTEN_BACKLOG = 128


class ApiServer(local.ThreadedHTTPServer):
    """Chalice's threaded local server, listening with LISTEN_BACKLOG."""

    request_queue_size = LISTEN_BACKLOG


class ApiFactory(CLIFactory):
    """Chalice's CLI factory, whose local server is an ApiServer."""

    def create_local_server(self, app_obj: Chalice, config: Config, host: str, port: int) -> LocalDevServer:
        """As chalice.local.create_local_server (the app served as a LocalChalice), choosing the server class,
        which that function does not let a caller do."""
        local.CustomLocalChalice.__bases__ = (local.LocalChalice, app_obj.__class__)
        app_obj.__class__ = local.CustomLocalChalice
        return LocalDevServer(app_obj, config, host, port, server_cls=ApiServer)


def local_server(host: str, port: int, stage: str) -> LocalDevServer:
    """Chalice's local server for the app at ROOT, as `chalice local` makes it, with a listen backlog of 128."""
    return create_local_server(ApiFactory(str(ROOT), environ=os.environ), host, port, stage)


def main(argv: list[str] | None = None) -> None:
    """Serve the app on host:port until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m devstack.api", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--stage", default="local")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--clock-file", help="follow the stack clock's offset published in this file")
    parser.add_argument("--platform-file", help="follow the store platform published in this file")
    parser.add_argument("--shopify-url", help="where the fake Shopify is served (its shop domain is sent there)")
    args = parser.parse_args(argv)
    try:
        overrides = parse_overrides(args.overrides)
    except ValueError as error:
        parser.error(str(error))

    os.chdir(ROOT)
    os.environ["AWS_CHALICE_CLI_MODE"] = "true"
    # Unknown paths reach the app's dead-end route, as on API Gateway (devstack/greedy_routes.py).
    greedy_routes.install()
    server = local_server(args.host, args.port, args.stage)
    os.environ.update(overrides)
    if args.clock_file or args.platform_file:
        _follow_the_stack(args.clock_file, args.platform_file, args.shopify_url)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server.server_close()
    sys.exit(0)


def _follow_the_stack(clock_file: str | None, platform_file: str | None, shopify_url: str | None) -> None:
    # The console can advance the stack's clock; holds and expiries made here must see the same time. It can also
    # switch the store platform, and a reserve link tapped after that must place its hold on the new store.
    from dataclasses import replace

    from chalicelib import wiring
    from chalicelib.clock import Clock
    from chalicelib.config import load_settings
    from chalicelib.wiring import Services
    from devstack.fake_model import model_for
    from devstack.stack import SharedClock, SharedOffset, SharedPlatform
    from devstack.stores import api_transport

    settings = load_settings()
    clock: Clock | None = SharedClock(SharedOffset(Path(clock_file))) if clock_file else None
    transport = api_transport(settings, shopify_url) if shopify_url else None

    def build(platform: str) -> Services:
        chosen = replace(settings, platform=platform) if platform else settings
        return Services(chosen, clock=clock, model=model_for(settings), transport=transport)

    if platform_file:
        wiring.install(cast("Services", PlatformFollower(SharedPlatform(Path(platform_file)), build)))
    else:
        wiring.install(build(""))


class PlatformFollower:
    """The app's services for the platform last published: rebuilt (fresh caches) when it changes."""

    def __init__(self, shared: SharedPlatform, build: Callable[[str], Services]) -> None:
        self.shared = shared
        self.build = build
        self._lock = threading.Lock()
        self._platform: str | None = None
        self._services: Services | None = None

    def current(self) -> Services:
        """The services for the platform published now."""
        platform = self.shared.read()
        with self._lock:
            if self._services is None or platform != self._platform:
                self._services, self._platform = self.build(platform), platform
            return self._services

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current(), name)


def _interrupt(signum: int, frame: object) -> None:
    # The stack stops this process with SIGTERM; finish like Ctrl-C, closing the socket.
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
