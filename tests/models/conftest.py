"""Fixtures for the model tests: the shared replay set, a real socket that
refuses connections and a tiny scripted OpenAI-style HTTP server on loopback.
(The embedded checkpoint, `embedded_checkpoint`, is tests/conftest.py's: the
SLURM demo uses the same one.)"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from model_helpers import ScriptedServer, models_listing

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def replay_dir() -> Path:
    folder = Path(os.environ.get("KERNELSWEEP_SHARED", REPO.parent / "shared")) / "replay" / "kernelbench-agentic"
    if not folder.is_dir():
        pytest.skip(f"replay set not found at {folder} (set KERNELSWEEP_SHARED to the shared folder)")
    return folder


@pytest.fixture
def refused_url():
    """A base URL whose port is bound but not listening: connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))  # holds the port so nobody else takes it; no listen()
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


@pytest.fixture
def scripted_server():
    servers = []

    def start(*script, served=("m",)) -> ScriptedServer:
        listing = models_listing(*served) if served is not None else (404, {"detail": "Not Found"})
        server = ScriptedServer(script, listing)
        server.thread.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.httpd.shutdown()
        server.httpd.server_close()
