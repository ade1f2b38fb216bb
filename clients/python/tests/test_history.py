"""The history methods, `conversations` and `conversation`, against the real `openagents serve`
(over HTTP and stdio): pages newest first with a cursor, a conversation's turns in order with
their outcomes, and `ConversationNotFoundError` for an id the runtime does not hold."""

from __future__ import annotations

import asyncio

import pytest

from openagents import AsyncClient, Client, ConversationNotFoundError, InvalidParamsError
from openagents.models import TurnOutcome

from .conftest import HttpServer


async def _history(client: AsyncClient) -> None:
    await client.submit("first question", conversation="py-a")
    await client.submit("second one", conversation="py-b")
    await client.submit("a follow-up", conversation="py-a")

    page = await client.conversations(limit=1)
    assert [c.id for c in page.conversations] == ["py-a"] and page.next is not None
    rest = await client.conversations(limit=10, cursor=page.next)
    assert [c.id for c in rest.conversations][:1] == ["py-b"]
    first = page.conversations[0]
    assert (first.runner, first.title, first.turns) == ("echo", "first question", 2)
    assert first.updated_at_ms >= first.created_at_ms

    conv = await client.conversation("py-a")
    assert conv.conversation.id == "py-a" and conv.next is None
    assert [t.task for t in conv.turns] == ["first question", "a follow-up"]
    assert [t.outcome for t in conv.turns] == [TurnOutcome.COMPLETED, TurnOutcome.COMPLETED]
    assert conv.turns[1].result == "a follow-up" and conv.turns[1].error is None
    for t in conv.turns:
        assert t.last_seq is not None and t.last_seq > t.first_seq
        assert t.finished_at_ms is not None and t.finished_at_ms >= t.started_at_ms
    one = await client.conversation("py-a", limit=1)
    assert [t.task for t in one.turns] == ["first question"] and one.next is not None
    two = await client.conversation("py-a", limit=1, cursor=one.next)
    assert [t.task for t in two.turns] == ["a follow-up"] and two.next is None

    with pytest.raises(ConversationNotFoundError) as nf:
        await client.conversation("py-missing")
    assert nf.value.retryable is False and nf.value.rpc_code == -32013
    with pytest.raises(InvalidParamsError):
        await client.conversations(limit=101)


def test_history_over_http(http_server: HttpServer) -> None:
    async def main() -> None:
        async with AsyncClient.http(http_server.url, token_file=http_server.token_file) as client:
            await _history(client)

    asyncio.run(main())


def test_history_over_stdio_with_the_blocking_client() -> None:
    with Client.stdio("echo") as client:
        client.submit("only turn", conversation="py-sync")
        page = client.conversations(limit=1)
        assert [c.id for c in page.conversations] == ["py-sync"]
        conv = client.conversation("py-sync")
        assert [(t.task, t.outcome) for t in conv.turns] == [("only turn", TurnOutcome.COMPLETED)]
