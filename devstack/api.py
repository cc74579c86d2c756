"""Serves the API with Chalice's local server, as `chalice local --stage local --no-autoreload` does.

`chalice local` puts the stage's variables from .chalice/config.json over the environment, so a
RATE_LIMIT_PER_MINUTE given to `make dev`, or the address of a stack on other ports, would be lost.
This runs the same server and applies the stack's `--set NAME=VALUE` overrides after Chalice has
loaded its stage, and before the first request (the app reads its settings on first use). With
`--clock-file` the app runs on the stack clock, whose offset the console publishes in that file.

    python -m devstack.api --port 8000 --set RATE_LIMIT_PER_MINUTE=600
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from devstack.stage import ROOT


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """NAME=VALUE pairs as a dict; ValueError for anything else."""
    overrides = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--set takes NAME=VALUE, got {pair!r}")
        overrides[name] = value
    return overrides


def main(argv: list[str] | None = None) -> None:
    """Serve the app on host:port until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m devstack.api", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--stage", default="local")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--clock-file", help="follow the stack clock's offset published in this file")
    args = parser.parse_args(argv)
    try:
        overrides = parse_overrides(args.overrides)
    except ValueError as error:
        parser.error(str(error))

    from chalice.cli import create_local_server
    from chalice.cli.factory import CLIFactory

    os.chdir(ROOT)
    os.environ["AWS_CHALICE_CLI_MODE"] = "true"
    factory = CLIFactory(str(ROOT), environ=os.environ)
    server = create_local_server(factory, args.host, args.port, args.stage)
    os.environ.update(overrides)
    if args.clock_file:
        _follow_stack_clock(Path(args.clock_file))
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server.server_close()
    sys.exit(0)


def _follow_stack_clock(path: Path) -> None:
    # The console can advance the stack's clock; holds and expiries made here must see the same time.
    from chalicelib import wiring
    from chalicelib.config import load_settings
    from chalicelib.wiring import Services
    from devstack.fake_model import model_for
    from devstack.stack import SharedClock, SharedOffset

    settings = load_settings()
    wiring.install(Services(settings, clock=SharedClock(SharedOffset(path)), model=model_for(settings)))


def _interrupt(signum: int, frame: object) -> None:
    # The stack stops this process with SIGTERM; finish like Ctrl-C, closing the socket.
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
