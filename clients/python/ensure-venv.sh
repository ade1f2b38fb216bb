#!/usr/bin/env bash
# Creates the virtualenv at the repository root (or $OPENAGENTS_VENV) if it is missing, and
# installs the pinned dev requirements and the package (editable) into it. Needs only python3.
# `run-tests.sh` and `make demo` call it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${OPENAGENTS_VENV:-$root/.venv}"

if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv" >&2
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-dev.txt"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e "$here"
