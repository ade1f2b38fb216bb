"""Support for the JSON-RPC client, SSE and probe tests: `openagents serve --http` (the real
binary, built by run-tests.sh) in a temporary operator setup, read from its readiness line, and
a strict check of JSON-RPC 2.0 response objects.

Every wait is for an observable event (a readiness line, a reply, an event) and bounded in time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN_DIR = ROOT / "target" / "debug"
OPENAGENTS = BIN_DIR / "openagents"
HERE = Path(__file__).resolve().parent
# The longest any one wait may take, in seconds.
BOUND = 30.0


@dataclass
class Server:
    """A running `openagents serve --http`."""

    process: subprocess.Popen[bytes]
    url: str  # without a trailing slash
    token: str
    folder: Path


def _registry(folder: Path) -> Path:
    """The registry: the echo runner, and a runner that ignores SIGTERM and holds its turn."""
    registry = folder / "runners.toml"
    registry.write_text(
        f'[runners.echo]\ncommand = "{BIN_DIR / "openagents-runner-echo"}"\n\n'
        f'[runners.stubborn]\ncommand = "{sys.executable}"\nargs = ["{HERE / "runners" / "stubborn.py"}"]\n'
    )
    return registry


def start_server(folder: Path, runner: str = "echo", settings: str = "") -> Server:
    """Starts `openagents serve --http --runner RUNNER` with an operator configuration that
    enables the server, plus `settings` (lines of `[capabilities.server]`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(f"[capabilities.server]\nenabled = true\n{settings}")
    env = dict(os.environ)
    env.update(
        OPENAGENTS_CONFIG=str(folder / "config.toml"),
        OPENAGENTS_RUNNERS=str(_registry(folder)),
        XDG_RUNTIME_DIR=str(folder),
    )
    process = subprocess.Popen(
        [str(OPENAGENTS), "serve", "--http", "--runner", runner],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    stdout = process.stdout
    assert stdout is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(BOUND)
    if not lines or not lines[0].strip():
        process.kill()
        process.wait()
        pytest.fail(f"`openagents serve --http` gave no readiness line within {BOUND} s")
    ready = json.loads(lines[0])
    token = Path(ready["token_file"]).read_text().strip()
    return Server(process=process, url=ready["url"].rstrip("/"), token=token, folder=folder)


def stop_server(server: Server) -> None:
    server.process.kill()
    server.process.wait(BOUND)
    if server.process.stdout is not None:
        server.process.stdout.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server(tmp_path_factory.mktemp("serve"))
    yield s
    stop_server(s)


def strict_response(obj: Any) -> dict[str, Any]:
    """`obj` when it is a JSON-RPC 2.0 response object exactly as section 5 defines it
    (`jsonrpc` "2.0", an `id` that is a string, a number or null, exactly one of `result` and
    `error`, an error with an integer `code` and a string `message`, no other members); fails
    the test otherwise."""
    assert isinstance(obj, dict), f"a response is an object: {obj!r}"
    assert obj.get("jsonrpc") == "2.0", f'a response carries "jsonrpc": "2.0": {obj!r}'
    assert "id" in obj, f"a response carries an id: {obj!r}"
    assert obj["id"] is None or (isinstance(obj["id"], (str, int)) and not isinstance(obj["id"], bool)), obj
    assert ("result" in obj) != ("error" in obj), f"exactly one of result and error: {obj!r}"
    assert set(obj) <= {"jsonrpc", "id", "result", "error"}, f"unknown members: {obj!r}"
    if "error" in obj:
        error = obj["error"]
        assert isinstance(error, dict), obj
        assert isinstance(error.get("code"), int) and not isinstance(error["code"], bool), obj
        assert isinstance(error.get("message"), str) and error["message"], obj
        assert set(error) <= {"code", "message", "data"}, obj
    return obj
