"""Fixtures: the real `openagents` binary, a temporary operator configuration (server enabled) and
a temporary runner registry holding the Rust echo and ask runners and the Python runners."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from openagents.models import RuntimeEventTurnCompleted, RuntimeEventTurnFailed

TERMINAL = (RuntimeEventTurnCompleted, RuntimeEventTurnFailed)
"""The events that end a turn."""

PYTHON_DIR = Path(__file__).resolve().parent.parent
REPO = PYTHON_DIR.parent.parent


def binary(name: str) -> Path:
    """A binary cargo built (debug profile)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / name
    if not path.exists():
        build = "cargo build -p openagents-cli -p openagents-runner -p openagents-codegen"
        pytest.fail(f"{path} is missing: build it with `{build}`")
    return path


@contextmanager
def generated_models(schema: Path, root: Path, package: str) -> Iterator[ModuleType]:
    """The `models` module generated for `schema` into `root/package`, importable while the
    context lasts (the package is forgotten after it)."""
    generate_python(schema, root / package)
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(f"{package}.models")
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
            del sys.modules[name]


def generate_python(schema: Path, out_dir: Path) -> None:
    """`openagents-codegen python` for `schema` into the package folder `out_dir`; a refusal fails
    the test with the generator's message."""
    done = subprocess.run(
        [str(binary("openagents-codegen")), "python", "--schema", str(schema), "--out-dir", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@dataclass
class Setup:
    """A temporary operator setup: where the config and registry are, and the environment."""

    dir: Path
    binary: Path
    env: dict[str, str]

    def run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args], env=self.env, capture_output=True, text=True, input=input, timeout=60
        )


@pytest.fixture(scope="session")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    d = tmp_path_factory.mktemp("openagents")
    oa = binary("openagents")
    echo = binary("openagents-runner-echo")
    ask = binary("openagents-runner-ask")
    (d / "config.toml").write_text("[capabilities.server]\nenabled = true\n")
    runners = {
        "echo": (str(echo), []),
        "ask": (str(ask), []),
        "py-echo": (sys.executable, [str(PYTHON_DIR / "examples" / "echo_runner.py")]),
        "py-slow": (sys.executable, [str(PYTHON_DIR / "tests" / "runners" / "slow_runner.py")]),
    }
    lines = []
    for rid, (command, args) in runners.items():
        lines.append(f"[runners.{rid}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    (d / "runners.toml").write_text("\n".join(lines))
    env = dict(os.environ)
    env.update(
        {
            "OPENAGENTS_CONFIG": str(d / "config.toml"),
            "OPENAGENTS_RUNNERS": str(d / "runners.toml"),
            "OPENAGENTS_BIN": str(oa),
            "XDG_RUNTIME_DIR": str(d),
        }
    )
    return Setup(dir=d, binary=oa, env=env)


@pytest.fixture(autouse=True)
def _operator_env(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("OPENAGENTS_CONFIG", "OPENAGENTS_RUNNERS", "OPENAGENTS_BIN", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(key, setup.env[key])


@dataclass
class HttpServer:
    """A running `openagents serve --http`: its readiness line and process."""

    url: str
    token_file: str
    process: subprocess.Popen[bytes]


@pytest.fixture
def http_server(setup: Setup) -> Iterator[HttpServer]:
    yield from _serve_http(setup, "echo")


@pytest.fixture
def slow_http_server(setup: Setup) -> Iterator[HttpServer]:
    yield from _serve_http(setup, "py-slow")


@pytest.fixture
def ask_http_server(setup: Setup) -> Iterator[HttpServer]:
    """A runtime whose runner asks for approval before it completes (`openagents-runner-ask`)."""
    yield from _serve_http(setup, "ask")


def _serve_http(setup: Setup, runner: str) -> Iterator[HttpServer]:
    process = subprocess.Popen(
        [str(setup.binary), "serve", "--http", "--runner", runner],
        env=setup.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    ready = json.loads(process.stdout.readline())  # the readiness line, not a sleep
    try:
        yield HttpServer(url=ready["url"], token_file=ready["token_file"], process=process)
    finally:
        process.kill()
        process.wait()
