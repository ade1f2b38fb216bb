#!/usr/bin/env python3
"""A test runner that streams `tick N` every 50 ms until it has sent as many as the task says (or
forever for `forever`), then completes: long enough to be busy, interrupted or cancelled."""

from __future__ import annotations

import itertools
import time

from openagents.models import Turn
from openagents.runner import Progress, serve_streaming


def run(turn: Turn, progress: Progress) -> str:
    count = None if turn.task == "forever" else int(turn.task)
    for n in itertools.count(1):
        if count is not None and n > count:
            break
        progress.text(f"tick {n}")
        time.sleep(0.05)
    return f"ticked {count}"


if __name__ == "__main__":
    serve_streaming(run)
