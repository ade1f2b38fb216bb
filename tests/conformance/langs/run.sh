#!/usr/bin/env bash
# Runs the JSON Schema Test Suite groups through the generated Python and TypeScript: what
# `make test-conformance-langs` runs. Sets up what the run needs when it is missing: the
# repository's virtualenv (clients/python/ensure-venv.sh), the TypeScript client's packages
# (`npm ci`), and the Python client's `unicode-patterns` extra (the `regex` package, at the version
# clients/python/pyproject.toml pins) in target/conformance-pydeps, outside the virtualenv, so the
# other tests keep running without it. Arguments go to the conformance-langs program.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$root"
venv="${OPENAGENTS_VENV:-$root/.venv}"
deps="$root/target/conformance-pydeps"

if [ ! -x "$venv/bin/python" ]; then clients/python/ensure-venv.sh; fi
if [ ! -d clients/typescript/node_modules/typescript ]; then (cd clients/typescript && npm ci --no-audit --no-fund --silent); fi
if ! PYTHONPATH="$deps" "$venv/bin/python" -c 'import regex' 2>/dev/null; then
    extra="$("$venv/bin/python" -c 'import tomllib; print(" ".join(tomllib.load(open("clients/python/pyproject.toml", "rb"))["project"]["optional-dependencies"]["unicode-patterns"]))')"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --target "$deps" $extra
fi
cargo run --quiet --locked -p openagents-conformance --bin conformance-langs -- --python "$venv/bin/python" --python-path "$deps" "$@"
