"""The schema check: a client compares the runtime's schema digest (HTTP headers, the WebSocket
handshake, `status` over stdio) with `SCHEMA_DIGEST`. A client generated from the runtime's own
schema reports nothing; one generated from an older bundle reports the mismatch once, naming both
digests, or with `strict_schema=True` raises `SchemaMismatchError`."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from openagents import (
    PROTOCOL_VERSION,
    SCHEMA_DIGEST,
    AsyncClient,
    OpenAgentsError,
    SchemaMismatchError,
    SchemaMismatchWarning,
)
from openagents._schema import RuntimeSchema, SchemaGuard

from .conftest import PYTHON_DIR, REPO, HttpServer, Setup, binary

TRANSPORTS = ["http", "websocket", "stdio"]


def client_for(transport: str, server: HttpServer, strict: bool = False) -> AsyncClient:
    if transport == "http":
        return AsyncClient.http(server.url, token_file=server.token_file, strict_schema=strict)
    if transport == "websocket":
        return AsyncClient.websocket(server.url, token_file=server.token_file, strict_schema=strict)
    return AsyncClient.stdio("echo", strict_schema=strict)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_a_client_from_the_runtime_schema_reports_nothing(
    http_server: HttpServer, transport: str, strict: bool
) -> None:
    async def main() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with client_for(transport, http_server, strict) as client:
                status = await client.status()
                assert (await client.submit("a b")).result == "a b"
            assert [w for w in caught if issubclass(w.category, SchemaMismatchWarning)] == []
        # The check had something to compare: the runtime reported its digest.
        assert status.schema_digest == SCHEMA_DIGEST
        if transport != "stdio":
            found = client.transport.runtime_schema
            assert found is not None and found.digest == SCHEMA_DIGEST and found.protocol_version
        assert client.schema.mismatch is None

    asyncio.run(main())


def test_the_guard_reports_once_or_raises_every_time() -> None:
    other = RuntimeSchema("0" * 64, "0.9.0", "HTTP http://127.0.0.1:1/")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        guard = SchemaGuard()
        guard.check(None)  # an older runtime says nothing: nothing to compare
        guard.check(RuntimeSchema(None, None, "stdio"))
        guard.check(RuntimeSchema(SCHEMA_DIGEST, "1.0.0", "HTTP http://127.0.0.1:1/"))
        assert caught == []
        guard.check(other)
        guard.check(other)
    assert len(caught) == 1 and issubclass(caught[0].category, SchemaMismatchWarning)
    warning = caught[0].message
    assert isinstance(warning, SchemaMismatchWarning)
    assert (warning.runtime_digest, warning.client_digest) == ("0" * 64, SCHEMA_DIGEST)
    assert warning.runtime_protocol_version == "0.9.0" and warning.where == "HTTP http://127.0.0.1:1/"
    message = str(warning)
    for needle in ("000000000000", SCHEMA_DIGEST[:12], "0.9.0", "http://127.0.0.1:1/", "make codegen", "compat"):
        assert needle in message, needle

    strict = SchemaGuard(strict=True)
    for _ in range(2):
        with pytest.raises(SchemaMismatchError) as info:
            strict.check(other)
        assert isinstance(info.value, OpenAgentsError) and info.value.runtime_digest == "0" * 64
    with pytest.raises(SchemaMismatchError):
        strict.check(None)  # once found, every later check fails too


# --- a client generated from an older bundle ---------------------------------------------------------


@pytest.fixture(scope="module")
def old_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A copy of this package generated from an older bundle (one description changed): the folder
    to put on PYTHONPATH, and its SCHEMA_DIGEST."""
    d = tmp_path_factory.mktemp("old-client")
    codegen = binary("openagents-codegen")
    bundle = d / "bundle.json"
    subprocess.run([str(codegen), "bundle", "--schema", str(REPO / "schema"), "--out", str(bundle)], check=True)
    doc = json.loads(bundle.read_text())
    doc["$defs"]["RuntimeStatus"]["description"] += " (as it read in an older release)"
    bundle.write_text(json.dumps(doc, indent=2))
    shutil.copytree(PYTHON_DIR / "src" / "openagents", d / "openagents", ignore=shutil.ignore_patterns("__pycache__"))
    out = d / "openagents" / "_generated"
    subprocess.run(
        [str(codegen), "python", "--schema", str(bundle), "--out-dir", str(out), "--error-root", "OpenAgentsError"],
        check=True,
    )
    text = (out / "constants.py").read_text()
    digest = text.split('SCHEMA_DIGEST: Final = "', 1)[1].split('"', 1)[0]
    assert len(digest) == 64 and digest != SCHEMA_DIGEST
    yield d, digest


SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, warnings
    import openagents
    from openagents import AsyncClient, SchemaMismatchError

    assert openagents.__file__.startswith(sys.argv[1]), openagents.__file__
    transport, url, token_file, strict = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "strict"
    warnings.simplefilter("always")  # so that "once per client" is the client's doing

    async def main() -> None:
        if transport == "http":
            client = AsyncClient.http(url, token_file=token_file, strict_schema=strict)
        elif transport == "websocket":
            client = AsyncClient.websocket(url, token_file=token_file, strict_schema=strict)
        else:
            client = AsyncClient.stdio("echo", strict_schema=strict)
        try:
            async with client:
                for _ in range(3):
                    status = await client.status()
                print("status", status.state)
        except SchemaMismatchError as e:
            print("raised", e.runtime_digest, e.client_digest, e.where)
            print(e, file=sys.stderr)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_a_client_from_an_older_bundle_reports_the_mismatch(
    setup: Setup, http_server: HttpServer, old_package: tuple[Path, str], transport: str, strict: bool
) -> None:
    folder, old_digest = old_package
    env = dict(setup.env, PYTHONPATH=str(folder))
    args = [str(folder), transport, http_server.url, http_server.token_file, "strict" if strict else "default"]
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    # The runtime's protocol version is named (the older bundle differs only in a description).
    runtime_version = f"runtime schema {SCHEMA_DIGEST[:12]} (protocol {PROTOCOL_VERSION})"
    for needle in (runtime_version, old_digest[:12], "make codegen", "openagents-codegen compat"):
        assert needle in run.stderr, f"{needle!r} not in {run.stderr}"
    where = {"http": f"HTTP {http_server.url}", "websocket": "WebSocket ws://", "stdio": "stdio ("}[transport]
    assert where in run.stderr, run.stderr
    if strict:
        assert run.stdout.split()[:3] == ["raised", SCHEMA_DIGEST, old_digest], run.stdout
        assert "SchemaMismatchWarning" not in run.stderr
    else:
        assert run.stdout.strip() == "status idle", run.stdout
        assert run.stderr.count("SchemaMismatchWarning") == 1, f"reported once per client: {run.stderr}"
