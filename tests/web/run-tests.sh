#!/usr/bin/env bash
# The web page's tests, from a fresh clone: what `make test-web` runs.
#   1. installs Debian's chromium when /usr/bin/chromium is missing
#   2. builds the binaries the tests drive (`openagents`, the example runners echo, ask, slow)
#   3. installs the pinned npm packages of the page (clients/web) and of the tests (playwright-core)
#   4. checks the checked-in bundle (crates/server/web) against its sources, and type-checks the page
#   5. runs the browser tests (`node --test`) against the real `openagents serve --http`
# Screenshots go to target/web-screenshots/; the test output prints their paths.
set -euo pipefail
cd "$(dirname "$0")"
root="$(cd ../.. && pwd)"

if [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium (Debian package)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
  fi
fi

(cd "$root" && cargo build --locked -p openagents-cli -p openagents-runner)

echo "== the web page's bundle (clients/web -> crates/server/web)"
(cd "$root/clients/web" && npm ci --no-audit --no-fund && npm run --silent typecheck && node build.mjs --check)

npm ci --no-audit --no-fund
rm -rf "$root/target/web-screenshots"
node --test --test-concurrency=1 --test-timeout=300000 web.test.mjs
