"""A real `openagents serve --http` for the metrics and audit tests: an operator configuration and a
runner registry in a temporary folder, credentials with exact grants, and the server's stderr
(its log) collected for the audit checks. Waits for the readiness line, never sleeps."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "target" / "debug"

ADMIN = "ad31a0d1" * 8
OBSERVER = "0b5e77e4" * 8
CONTROLLER = "c0de7011" * 8


@dataclass
class Server:
    """A running server: its base URL, process and log (stderr) so far."""

    url: str
    process: subprocess.Popen[str]
    log_lines: list[str] = field(default_factory=list)

    def log(self) -> str:
        return "\n".join(self.log_lines)


def _write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    config = _write(tmp_path / "config.toml", "[capabilities.server]\nenabled = true\n")
    registry = _write(
        tmp_path / "runners.toml",
        f'[runners.echo]\ncommand = "{BIN / "openagents-runner-echo"}"\n\n'
        f'[runners.ask]\ncommand = "{BIN / "openagents-runner-ask"}"\n',
    )
    creds = _write(
        tmp_path / "credentials.toml",
        f'[credentials.root]\ntoken = "{ADMIN}"\nrole = "admin"\n\n'
        f'[credentials.watcher]\ntoken = "{OBSERVER}"\nrole = "observer"\n\n'
        f'[credentials.ci]\ntoken = "{CONTROLLER}"\nrole = "controller"\n',
    )
    env = {**os.environ, "OPENAGENTS_CONFIG": str(config), "OPENAGENTS_RUNNERS": str(registry), "RUST_LOG": "openagents=info"}
    process = subprocess.Popen(
        [str(BIN / "openagents"), "--log-format", "json", "serve", "--http", "--runner", "echo", "--runner", "ask", "--credentials", str(creds), "--approval-timeout", "5"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None and process.stderr is not None
    ready = process.stdout.readline()
    assert ready, f"no readiness line: {process.stderr.read()}"
    url = json.loads(ready)["url"].rstrip("/")
    srv = Server(url=url, process=process)
    stderr = process.stderr

    def collect() -> None:
        for line in stderr:
            srv.log_lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    try:
        yield srv
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=5)
