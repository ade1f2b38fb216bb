"""A runner that reports one `text` event and then holds its turn, ignoring SIGTERM, so that
the host must wait out its kill grace before the turn ends: a shutdown stays in progress long
enough to be observed. Needs only the Python standard library."""

import json
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
turn = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"type": "text", "text": f"holding: {turn['task']}"}) + "\n")
sys.stdout.flush()
time.sleep(300)
