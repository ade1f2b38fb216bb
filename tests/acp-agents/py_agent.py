"""A fake ACP agent on the official Python SDK (`agent-client-protocol`), for one whole turn
through openagents' ACP runner host: a thought, a permission request, then an answer that
reports the permission's outcome and how many prompts the session has seen."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    update_agent_message_text,
    update_agent_thought_text,
)
from acp.interfaces import Client
from acp.schema import PermissionOption, ToolCallUpdate


class FakeAgent(Agent):
    def __init__(self) -> None:
        self._conn: Client | None = None
        self._prompts: dict[str, int] = {}

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        session_id = f"py-{os.getpid()}-{len(self._prompts) + 1}"
        self._prompts[session_id] = 0
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        assert self._conn is not None
        self._prompts[session_id] = self._prompts.get(session_id, 0) + 1
        task = "".join(getattr(b, "text", "") for b in prompt)
        await self._conn.session_update(session_id, update_agent_thought_text(f"python agent thinking about {task}"))
        answer = await self._conn.request_permission(
            session_id,
            ToolCallUpdate(tool_call_id="py-call-1", title="Run the Python tool", kind="execute"),
            [
                PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                PermissionOption(option_id="no", name="Reject", kind="reject_once"),
            ],
        )
        outcome = getattr(answer.outcome, "option_id", None) or answer.outcome.outcome
        await self._conn.session_update(
            session_id,
            update_agent_message_text(f"python agent: prompts={self._prompts[session_id]} permission={outcome} pid={os.getpid()}"),
        )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(run_agent(FakeAgent()))
