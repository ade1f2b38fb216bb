#!/usr/bin/env bash
# The Python client's checks, as `make test` runs them: creates .venv at the repository root if it
# is missing (or $OPENAGENTS_VENV), installs the package (editable) and the pinned dev requirements,
# builds the `openagents` binary and generator the tests drive, then runs ruff (lint and format),
# mypy --strict and pytest. Arguments go to pytest.
# Needs only python3 (3.10 or newer) and cargo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${OPENAGENTS_VENV:-$root/.venv}"  # override to test from a fresh environment
py="$venv/bin/python"

echo "== installing the package (editable) and the pinned dev requirements into $venv"
"$here/ensure-venv.sh"

echo "== building the openagents binary, the example runners and the generator"
(cd "$root" && cargo build --quiet --locked -p openagents-cli -p openagents-runner -p openagents-codegen)

cd "$here"
echo "== ruff check"
"$venv/bin/ruff" check src tests examples bench
echo "== ruff format --check (the generated modules must already be formatted)"
"$venv/bin/ruff" format --check src tests examples bench
echo "== mypy --strict"
"$venv/bin/mypy"
echo "== pytest"
"$py" -m pytest -q "$@"
