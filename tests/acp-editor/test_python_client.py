"""`openagents acp` driven by the official Python ACP package (`agent-client-protocol`): one whole
turn through the `ask` runner, with streaming and an approval the client allows."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, ClientCapabilities, Implementation, RequestPermissionResponse

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "target" / "debug"


class EditorClient:
    """A client that records every update and allows every approval it is asked for."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.asked: list[Any] = []

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> RequestPermissionResponse:
        self.asked.append((session_id, tool_call, options))
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))


async def drive(folder: Path) -> tuple[EditorClient, Any, str, int | None]:
    client = EditorClient()
    env = {"OPENAGENTS_CONFIG": str(folder / "config.toml"), "OPENAGENTS_RUNNERS": str(folder / "runners.toml"), "HOME": str(folder)}
    async with spawn_agent_process(client, str(BIN / "openagents"), "acp", "--runner", "ask", env=env, cwd=str(folder)) as (conn, process):
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="openagents-python-test", version="1.0.0"),
        )
        assert init.protocol_version == 1
        session = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
        response = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("write the report")]), 30)
    code = await asyncio.wait_for(process.wait(), 15)
    return client, response, session.session_id, code


def test_python_sdk_drives_a_whole_turn_with_an_approval() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "config.toml").write_text("[capabilities.server]\nenabled = true\n")
        (folder / "runners.toml").write_text(f'[runners.ask]\ncommand = "{BIN / "openagents-runner-ask"}"\n')
        client, response, session_id, code = asyncio.run(drive(folder))
    assert response.stop_reason == "end_turn"
    assert code == 0
    assert len(client.asked) == 1
    kinds = [u.session_update for s, u in client.updates if s == session_id]
    assert kinds == ["agent_thought_chunk", "tool_call", "tool_call_update", "agent_message_chunk"], kinds
    message = [u.content.text for _, u in client.updates if u.session_update == "agent_message_chunk"]
    assert message == ["approved: write the report"]

