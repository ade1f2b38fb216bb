"""`GET /metrics` read by the Prometheus project's own text-format parser, with counters that
move after a turn; the audit log (JSON lines on stderr) records a failed authentication, a
forbidden call and an approval answered by a named credential, and no log line holds a token."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from observability_server import ADMIN, CONTROLLER, OBSERVER, Server, server  # noqa: F401 (the fixture)
from prometheus_client.parser import text_string_to_metric_families
from websockets.sync.client import connect


def metrics(server: Server, token: str = ADMIN) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    r = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def rpc(server: Server, token: str, method: str, params: object = None, id: int = 1) -> dict[str, object]:
    body: dict[str, object] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    r = httpx.post(f"{server.url}/rpc", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    reply: dict[str, object] = r.json()
    return reply


def audit(server: Server, event: str, timeout: float = 10.0) -> list[dict[str, object]]:
    """The audit records of kind `event`, waiting (bounded) for at least one."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for line in list(server.log_lines):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("target") == "openagents::audit" and record.get("event") == event:
                found.append(record)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_metrics_parse_as_prometheus_text_and_move_after_a_turn(server: Server) -> None:
    before = metrics(server)
    for name in ("openagents_turns_total", "openagents_events_published_total", "openagents_subscribers", "openagents_lagged_total", "openagents_gaps_total", "openagents_connections", "openagents_connections_accepted_total", "openagents_auth_failures_total", "openagents_request_duration_seconds_bucket"):
        assert name in before, f"{name} missing from /metrics: {sorted(before)}"
    completed = (("outcome", "completed"),)
    assert before["openagents_turns_total"][completed] == 0

    reply = rpc(server, ADMIN, "submit", {"task": "hello metrics"})
    assert reply.get("result"), reply
    httpx.post(f"{server.url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "status"}, headers={"Authorization": "Bearer wrong-token"}, timeout=10)

    after = metrics(server)
    assert after["openagents_turns_total"][completed] == 1
    assert after["openagents_turns_total"][(("outcome", "submitted"),)] == 1
    assert after["openagents_events_published_total"][()] >= before["openagents_events_published_total"][()] + 3
    assert after["openagents_auth_failures_total"][()] == before["openagents_auth_failures_total"][()] + 1
    submit_ok = (("method", "submit"), ("outcome", "ok"))
    assert after["openagents_requests_total"][submit_ok] == 1
    # The histogram's +Inf bucket counts every submit; buckets are cumulative.
    inf = (("le", "+Inf"), ("method", "submit"))
    assert after["openagents_request_duration_seconds_bucket"][inf] == 1
    assert after["openagents_request_duration_seconds_count"][(("method", "submit"),)] == 1


def test_metrics_need_a_grant_of_their_own(server: Server) -> None:
    for token in (OBSERVER, CONTROLLER):
        r = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["data"]["code"] == "forbidden"
    r = httpx.get(f"{server.url}/metrics", timeout=10)
    assert r.status_code == 401
    assert r.json()["jsonrpc"] == "2.0"


def test_the_audit_log_records_security_events_and_never_a_token(server: Server) -> None:
    # A failed authentication, with a token that must not be logged.
    leaked = "f00d" * 16
    r = httpx.post(f"{server.url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "status"}, headers={"Authorization": f"Bearer {leaked}"}, timeout=10)
    assert r.status_code == 401
    failed = audit(server, "auth_failed")
    assert failed and failed[0]["path"] == "/rpc" and failed[0]["peer"] == "127.0.0.1", failed
    # A forbidden call.
    reply = rpc(server, OBSERVER, "shutdown")
    assert reply["error"]["data"]["code"] == "forbidden"  # type: ignore[index]
    forbidden = audit(server, "forbidden")
    assert any(f["credential"] == "watcher" and f["method"] == "shutdown" for f in forbidden), forbidden

    # An approval, answered over the WebSocket by the controller `ci` for its own turn.
    answered = threading.Event()

    def frontend() -> None:
        ws_url = server.url.replace("http://", "ws://") + "/frontend/v2"
        with connect(ws_url, additional_headers={"Authorization": f"Bearer {CONTROLLER}"}, open_timeout=10) as ws:
            ready.set()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                message = json.loads(ws.recv(timeout=20))
                if message.get("method") == "frontend.v2.approval":
                    ws.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"approved": True}}))
                    answered.set()
                    return

    ready = threading.Event()
    thread = threading.Thread(target=frontend, daemon=True)
    thread.start()
    assert ready.wait(10), "the frontend did not connect"
    reply = rpc(server, CONTROLLER, "submit", {"task": "may I?", "runner": "ask"})
    assert answered.wait(1), "the frontend was never asked"
    thread.join(timeout=10)
    assert reply.get("result"), reply
    asked = audit(server, "approval_requested")
    assert asked, "no approval_requested audit record"
    resolved = audit(server, "approval_answered")
    assert any(r["by"] == "ci" and r["approved"] is True for r in resolved), resolved
    taken = audit(server, "lease_taken")
    assert any(t["holder"] == "ci" for t in taken), taken

    log = server.log()
    for token in (leaked, ADMIN, OBSERVER, CONTROLLER):
        assert token not in log, "a token reached the log"


@pytest.mark.parametrize("fmt", ["json"])
def test_every_log_line_is_json_with_the_json_format(server: Server, fmt: str) -> None:
    rpc(server, ADMIN, "submit", {"task": "one line each"})
    audit(server, "turn_started")
    lines = [line for line in server.log_lines if line.strip()]
    assert lines, "the server logged nothing"
    for line in lines:
        record = json.loads(line)
        assert record["level"] in {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}, record
        assert "target" in record and "timestamp" in record, record
