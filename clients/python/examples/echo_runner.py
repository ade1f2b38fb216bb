#!/usr/bin/env python3
"""The `echo` example runner in Python: streams the task back word by word as `text` events, then
completes with the whole task. It behaves exactly like the Rust `openagents-runner-echo`.

Register it in the operator's runner registry (`$OPENAGENTS_RUNNERS`, a runners.toml):

    [runners.py-echo]
    command = "/absolute/path/to/python3"
    args = ["/absolute/path/to/clients/python/examples/echo_runner.py"]

then `openagents run --runner py-echo "hello world"`.
"""

from __future__ import annotations

import sys

from openagents.models import Turn
from openagents.runner import Progress, serve_streaming


def run(turn: Turn, progress: Progress) -> str:
    print(f"py-echo: turn {turn.assignment} for {turn.agent.runner}", file=sys.stderr)
    for word in turn.task.split():
        progress.text(word)
    return turn.task


if __name__ == "__main__":
    serve_streaming(run)
