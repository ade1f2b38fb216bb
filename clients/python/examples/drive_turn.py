#!/usr/bin/env python3
"""Drives one turn from Python and prints its events as they stream.

Over stdio (starts `openagents serve --stdio` itself; the operator's configuration must enable
the server, and the runner comes from the operator's registry):

    python drive_turn.py --runner echo "hello from python"

Over HTTP (a runtime started with `openagents serve --http`):

    python drive_turn.py --url http://127.0.0.1:PORT/ --token-file FILE "hello from python"
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from openagents import AsyncClient, RuntimeSubmitException
from openagents.models import RuntimeEventText, RuntimeEventTurnCompleted, RuntimeEventTurnFailed


async def drive(client: AsyncClient, task: str) -> int:
    async with client, client.events() as events:  # subscribed before submitting: nothing is missed
        submit = asyncio.create_task(client.submit(task))
        async for ev in events:
            match ev.event:
                case RuntimeEventText(text=text):
                    print(f"  [{ev.seq}] text: {text}")
                case RuntimeEventTurnCompleted() | RuntimeEventTurnFailed():
                    print(f"  [{ev.seq}] {ev.event.type}")
                    break
                case other:
                    print(f"  [{ev.seq}] {other.type}")
        try:
            result = await submit
        except RuntimeSubmitException as e:
            print(f"failed: {e.message} ({e.code}, retryable: {e.retryable})", file=sys.stderr)
            return 1
        print(f"result: {result.result}")
        status = await client.status()
        print(f"runtime: {status.state}, {status.counters.completed} turn(s) completed, last event {status.last_seq}")
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", help="what the agent is asked to do")
    parser.add_argument("--runner", default="echo", help="the runner (stdio: also the runtime's default)")
    parser.add_argument("--url", help="an HTTP runtime's URL, as `openagents serve --http` printed it")
    parser.add_argument("--token-file", help="the HTTP runtime's token file")
    parser.add_argument("--binary", help="the openagents binary (default: $OPENAGENTS_BIN, then PATH)")
    args = parser.parse_args()
    if args.url:
        client = AsyncClient.http(args.url, token_file=args.token_file)
        print(f"== one turn over HTTP ({args.url})")
    else:
        client = AsyncClient.stdio(args.runner, binary=args.binary)
        print(f"== one turn over stdio (openagents serve --stdio --runner {args.runner})")
    return asyncio.run(drive(client, args.task))


if __name__ == "__main__":
    sys.exit(main())
