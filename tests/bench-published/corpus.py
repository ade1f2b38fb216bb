"""Writes corpus.json: the documents every published-schema benchmark times (Rust, TypeScript, Python).

    python3 tests/bench-published/corpus.py        # rewrites tests/bench-published/corpus.json

Deterministic (a fixed seed, no clock): running it again gives the same bytes. Each set is a list of
JSON texts, all valid documents of one named type of one vendored schema:

- ACP v1 `SessionNotification` (the params of `session/update`): streamed `agent_message_chunk`
  text, `tool_call` notifications with content (text and diff) and locations plus their
  `tool_call_update`s, `plan` updates of 3 to 24 entries, and one 32 KiB markdown chunk;
- MCP 2026-07-28 `CallToolRequest` (a whole `tools/call` request): small arguments, nested
  arguments, and one 32 KiB file write.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
rng = random.Random(20260728)

WORDS = (
    "the agent reads the file and then runs the tests before it edits the parser so that every "
    "failing case is fixed without changing the public API of the crate; it also checks that the "
    "benchmark numbers did not move and reports what it changed in a short summary for the user"
).split()

MIXED = [
    "Here is the plan:\n\n",
    "1. Read `src/parser.rs` and find where `Token::Eof` is handled.\n",
    '2. Add a test for the "unterminated string" case.\n',
    '```rust\nfn main() {\n    println!("hello, {}", name);\n}\n```\n',
    "Ünïcödé àccents — naïve café, Съешь же ещё этих мягких булок, 我能吞下玻璃而不伤身体。 ",
    "🦀🚀✨ done.\t(see C:\\\\work\\\\notes)\n",
]


def text_of(n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def dumps(doc: object) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def session(update: dict) -> dict:
    return {"sessionId": "sess_9f3c2a71", "update": update}


def message_chunks() -> list[str]:
    docs = []
    for i in range(40):
        # Streamed model output: mostly a few tokens, now and then a longer piece.
        n = rng.choice([1, 2, 3, 4, 6, 8, 12, 40])
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text_of(n) + " "}}
        if i % 2 == 0:
            update["messageId"] = "msg_0007"
        docs.append(dumps(session(update)))
    return docs


def tool_calls() -> list[str]:
    docs = []
    kinds = ["read", "edit", "search", "execute", "fetch"]
    for i in range(6):
        call_id = f"call_{i:04d}"
        kind = kinds[i % len(kinds)]
        path = f"/home/user/project/src/module_{i}.rs"
        old = "\n".join(f"    let x{j} = parse(input, {j})?;" for j in range(8))
        new = "\n".join(f"    let x{j} = parse_checked(input, {j})?;" for j in range(8))
        docs.append(
            dumps(
                session(
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": call_id,
                        "title": f"{kind.capitalize()} {path}",
                        "kind": kind,
                        "status": "pending",
                        "locations": [{"path": path, "line": 10 + i}, {"path": "/home/user/project/Cargo.toml"}],
                        "rawInput": {"path": path, "limit": 200, "offset": 0},
                    }
                )
            )
        )
        docs.append(
            dumps(session({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"}))
        )
        docs.append(
            dumps(
                session(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "status": "completed",
                        "content": [
                            {"type": "content", "content": {"type": "text", "text": text_of(30)}},
                            {"type": "diff", "path": path, "oldText": old, "newText": new},
                        ],
                        "locations": [{"path": path, "line": 12}],
                        "rawOutput": {"exitCode": 0, "stdout": text_of(20)},
                    }
                )
            )
        )
    return docs


def plans() -> list[str]:
    docs = []
    for n in (3, 5, 8, 12, 24):
        entries = [
            {
                "content": text_of(6 + k % 5),
                "priority": ["high", "medium", "low"][k % 3],
                "status": ["completed", "in_progress", "pending"][min(k, 2)],
            }
            for k in range(n)
        ]
        docs.append(dumps(session({"sessionUpdate": "plan", "entries": entries})))
    return docs


def large_chunk() -> list[str]:
    text = ""
    k = 0
    while len(text.encode()) < 32 * 1024:
        text += MIXED[k % len(MIXED)]
        k += 1
    return [
        dumps(
            session(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                    "messageId": "msg_0008",
                }
            )
        )
    ]


def request(i: int, name: str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "example-client", "version": "1.4.2"},
                "progressToken": f"tok-{i}",
            },
        },
    }


def mcp_small() -> list[str]:
    calls = [
        ("get_weather", lambda i: {"city": "Lyon", "units": "metric"}),
        ("read_file", lambda i: {"path": f"/srv/data/report-{i}.csv"}),
        ("search", lambda i: {"query": text_of(4), "limit": 10}),
        ("run_command", lambda i: {"command": "cargo", "args": ["test", "--workspace"], "timeoutMs": 60000}),
    ]
    docs = []
    for i in range(20):
        name, arguments = calls[i % len(calls)]
        docs.append(dumps(request(i, name, arguments(i))))
    return docs


def mcp_nested() -> list[str]:
    docs = []
    for i in range(8):
        rows = [
            {
                "id": r,
                "name": text_of(2),
                "score": round(rng.random() * 100, 3),
                "active": r % 2 == 0,
                "tags": [text_of(1), text_of(1)],
                "parent": None,
            }
            for r in range(4 + 3 * i)
        ]
        args = {
            "table": "customers",
            "rows": rows,
            "options": {"upsert": True, "batch": 50, "onConflict": {"columns": ["id"], "action": "update"}},
        }
        docs.append(dumps(request(1000 + i, "db_insert", args)))
    return docs


def mcp_large() -> list[str]:
    content = ""
    k = 0
    while len(content.encode()) < 32 * 1024:
        content += MIXED[k % len(MIXED)]
        k += 1
    return [
        dumps(
            request(2000, "write_file", {"path": "/home/user/project/NOTES.md", "content": content, "createDirs": True})
        )
    ]


SETS = [
    ("acp-message-chunks", "acp-v1", "SessionNotification", message_chunks),
    ("acp-tool-calls", "acp-v1", "SessionNotification", tool_calls),
    ("acp-plans", "acp-v1", "SessionNotification", plans),
    ("acp-large-chunk", "acp-v1", "SessionNotification", large_chunk),
    ("mcp-tools-call-small", "mcp-2026-07-28", "CallToolRequest", mcp_small),
    ("mcp-tools-call-nested", "mcp-2026-07-28", "CallToolRequest", mcp_nested),
    ("mcp-tools-call-large", "mcp-2026-07-28", "CallToolRequest", mcp_large),
]


def main() -> None:
    sets = [
        {"name": name, "schema": schema, "type": type_name, "docs": make()} for name, schema, type_name, make in SETS
    ]
    text = json.dumps({"sets": sets}, ensure_ascii=False, indent=1) + "\n"
    (HERE / "corpus.json").write_text(text, encoding="utf-8")
    for s in sets:
        sizes = [len(d.encode()) for d in s["docs"]]
        print(f"{s['name']}: {len(sizes)} documents, {min(sizes)}-{max(sizes)} bytes, {sum(sizes)} in all")


if __name__ == "__main__":
    main()
