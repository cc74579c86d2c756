"""The local stack's servers as `make dev` starts them: the API's listen backlog, and the emulator kept quiet."""

from __future__ import annotations

import logging
import os
import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from moto.server import ThreadedMotoServer

from devstack.api import LISTEN_BACKLOG, local_server
from devstack.runner import SERVER_LOGGERS, server_logging

SIMULTANEOUS = 32


@pytest.fixture
def server_loggers() -> Iterator[None]:
    """Put the servers' logger levels back as they were."""
    levels = {name: logging.getLogger(name).level for name in SERVER_LOGGERS}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture
def environment() -> Iterator[None]:
    """Put os.environ back as it was: Chalice writes the stage's variables into it, as the API process wants."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_the_local_api_answers_every_one_of_32_simultaneous_connections(environment: None) -> None:
    os.environ["AWS_CHALICE_CLI_MODE"] = "true"
    server = local_server("127.0.0.1", 0, "local")
    assert server.server.request_queue_size == LISTEN_BACKLOG
    host, port = server.server.server_address[:2]
    clients = []
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    try:
        # Every connection is made before the server accepts any: the kernel holds them all in the backlog.
        # With http.server's backlog of 5 the seventh could not connect (its handshake is dropped, then times out).
        for _ in range(SIMULTANEOUS):
            client = socket.create_connection((str(host), port), timeout=10)
            client.sendall(b"GET /widget.js HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            clients.append(client)
        serving.start()
        answers = [_read_all(client) for client in clients]
    finally:
        for client in clients:
            client.close()
        if serving.is_alive():
            server.shutdown()
        server.server.server_close()
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * SIMULTANEOUS


def _read_all(client: socket.socket) -> bytes:
    chunks = []
    while chunk := client.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _emulator_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        with caplog.at_level(logging.DEBUG):
            caplog.clear()
            with urllib.request.urlopen(f"http://{host}:{port}/moto-api/data.json", timeout=10):
                pass
    finally:
        moto.stop()
    return [r for r in caplog.records if r.name.split(".")[0] in SERVER_LOGGERS]


def test_the_emulators_request_log_and_tracebacks_stay_out_of_the_terminal(
    caplog: pytest.LogCaptureFixture, server_loggers: None
) -> None:
    server_logging(verbose=False)
    assert _emulator_records(caplog) == []
    for name in SERVER_LOGGERS:
        # werkzeug writes a failed request's traceback at ERROR: that stays out too.
        assert not logging.getLogger(name).isEnabledFor(logging.ERROR)


def test_verbose_shows_the_emulators_request_log(caplog: pytest.LogCaptureFixture, server_loggers: None) -> None:
    server_logging(verbose=True)
    [record] = _emulator_records(caplog)
    assert record.name == "werkzeug" and "GET /moto-api/data.json" in record.getMessage()
