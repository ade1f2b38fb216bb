#!/usr/bin/env bash
# The TypeScript client's tests, from a fresh clone: what `make test` runs for clients/typescript.
#   1. builds the binaries the tests drive (the real `openagents`, the Rust echo runner, the generator, kv-server)
#   2. installs the pinned npm packages (`npm ci`, from package-lock.json)
#   3. builds the package, type-checks everything with `tsc --strict --noEmit`
#   4. runs `node --test` on the compiled tests
set -euo pipefail
cd "$(dirname "$0")"
root="$(cd ../.. && pwd)"

(cd "$root" && cargo build --locked -p openagents-cli -p openagents-runner -p openagents-codegen -p kv-example)
export OPENAGENTS_BIN="$root/target/debug/openagents"

npm ci --no-audit --no-fund
rm -rf dist build
npm run build
npx tsc -p tsconfig.check.json
npm run build:test
node --test --test-concurrency=2 --test-timeout=300000 build/test/*.test.js
