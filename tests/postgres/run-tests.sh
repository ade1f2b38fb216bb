#!/usr/bin/env bash
# The PostgreSQL store against a real server, as `make test-postgres` runs them:
#   1. finds initdb and pg_ctl under /usr/lib/postgresql/*/bin, installing Debian's postgresql
#      package when they are missing;
#   2. makes a cluster in a temporary folder (as the `postgres` system user when run as root:
#      PostgreSQL refuses to run as root), trust authentication, listening on 127.0.0.1 only on
#      a free port, its socket in the folder;
#   3. runs crates/server/tests/postgres_store.rs (the store contract), then
#      crates/cli/tests/postgres.rs, with OPENAGENTS_TEST_POSTGRES set to its URL and
#      OPENAGENTS_TEST_POSTGRES_CTL to a script that stops (`stop`, immediate) and starts
#      (`start`) the server, so a test can take it away mid-turn;
#   4. stops the server and removes the folder however it ends.
# With `--run COMMAND…`, it runs COMMAND instead of the tests, with the same variables set and
# the server's fsync on (the store benchmark: `make bench-store`). The tests run with fsync
# off (faster; they stop the server, never the machine).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

find_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  return 1
}

if ! bin="$(find_bin)"; then
  echo "== installing postgresql (Debian package)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
  fi
  bin="$(find_bin)"
fi

tmp="$(mktemp -d /tmp/openagents-postgres.XXXXXX)"
chmod 755 "$tmp"
if [ "$(id -u)" = 0 ]; then
  if ! id -u postgres >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin postgres
  fi
  as_pg=(runuser -u postgres --)
  chown postgres "$tmp"
else
  as_pg=()
fi

fsync=off
if [ "${1:-}" = "--run" ]; then fsync=on; fi
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
data="$tmp/data"
cleanup() {
  "${as_pg[@]}" "$bin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "== initdb in $tmp (PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}'), port $port)"
"${as_pg[@]}" "$bin/initdb" -D "$data" -U openagents --auth=trust -E UTF8 --no-sync >"$tmp/initdb.log" 2>&1 || { cat "$tmp/initdb.log"; exit 1; }

# The control script the tests call: `stop` (immediate: what a crash looks like to a client) and
# `start` (waits until the server accepts connections).
cat >"$tmp/ctl.sh" <<CTL
#!/usr/bin/env bash
set -euo pipefail
case "\$1" in
  stop) exec ${as_pg[*]} "$bin/pg_ctl" -D "$data" stop -m immediate ;;
  start) exec ${as_pg[*]} "$bin/pg_ctl" -D "$data" -l "$tmp/server.log" -w -t 30 start -o "-c listen_addresses=127.0.0.1 -p $port -k $tmp -c fsync=$fsync" ;;
  *) echo "usage: \$0 stop|start" >&2; exit 2 ;;
esac
CTL
chmod 755 "$tmp/ctl.sh"
"$tmp/ctl.sh" start >/dev/null

export OPENAGENTS_TEST_POSTGRES="postgres://openagents@127.0.0.1:$port/postgres"
export OPENAGENTS_TEST_POSTGRES_CTL="$tmp/ctl.sh"

if [ "${1:-}" = "--run" ]; then
  shift
  cd "$root"
  "$@"
  exit
fi

cd "$root"
echo "== cargo test -p openagents-server --test postgres_store ($OPENAGENTS_TEST_POSTGRES)"
cargo test --locked -p openagents-server --test postgres_store "$@"
echo "== cargo test -p openagents-cli --test postgres ($OPENAGENTS_TEST_POSTGRES)"
cargo test --locked -p openagents-cli --test postgres "$@"
