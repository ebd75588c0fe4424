"""Fixtures: in-process stand-in servers (tests/standin/openai_server.py, not an engine)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.standin.openai_server import StandinServer, serve_forever_in_thread


@pytest.fixture
def standin() -> Iterator[Callable[..., StandinServer]]:
    """Start stand-in servers on 127.0.0.1 with ephemeral ports; all are stopped afterwards."""
    started: list[StandinServer] = []

    def start(**kwargs) -> StandinServer:
        server = serve_forever_in_thread("127.0.0.1", 0, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()
