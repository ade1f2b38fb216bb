"""Two turns of one conversation through an ACP runner, driven by the shipped Python client over
the WebSocket (approvals approved by its callback) and over HTTP (nobody to ask: denied). Prints
one JSON line per turn: the result text."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from openagents import AsyncClient


async def main() -> None:
    url, token_file, runner = os.environ["OPENAGENTS_URL"], os.environ["OPENAGENTS_TOKEN_FILE"], sys.argv[1]
    async with AsyncClient.websocket(url, token_file=token_file, on_approval=lambda prompt: True) as ws:
        for task in ("ask", "count"):
            r = await ws.submit(task, runner=runner, conversation="py-client-1")
            print(json.dumps({"via": "websocket", "result": r.result}), flush=True)
    async with AsyncClient.http(url, token_file=token_file) as http:
        for task in ("ask", "count"):
            r = await http.submit(task, runner=runner, conversation="py-client-1")
            print(json.dumps({"via": "http", "result": r.result}), flush=True)


asyncio.run(main())
