# openagents — entry points. Every target installs what it needs itself.
#   make demo      build, run a turn through the echo runner, validate sample documents and show refused ones
#   make test      everything CI runs: Rust, the Python client, the TypeScript client
#   make codegen   regenerate every checked-in generated file (clients, snapshots)
#   make compat    the compatibility verdict of the current schema against the published history
#   make bench     benchmarks (not part of make test); make bench-published, make bench-rpc: one of them alone
#   make fuzz      coverage-guided fuzzing for a bounded time (not part of make test)
#   make soak      a bounded soak over every transport (not part of make test)

CARGO ?= cargo
BIN := target/debug/openagents
SAMPLES := tests/samples

.PHONY: all prereqs build demo demo-python demo-typescript test test-rust test-python test-typescript test-conformance-langs test-published test-acp-agents test-acp-editor test-web test-standards test-postgres test-publish codegen bench-store bench-rpc check-codegen compat bench bench-published fuzz soak clean

all: build

build:
	$(CARGO) build --locked -p openagents-cli -p openagents-runner

# A runner registry under the repository (never the user's own), holding the example runner.
DEMO := target/demo
$(DEMO)/runners.toml: build
	@mkdir -p $(DEMO)
	@printf '[runners.echo]\ncommand = "%s"\n' "$(CURDIR)/target/debug/openagents-runner-echo" > $@

# What `make demo` and `make test` need on the machine; everything else they install themselves.
prereqs:
	@missing=""; \
	command -v $(CARGO) >/dev/null 2>&1 || missing="$$missing cargo (Rust 1.95);"; \
	if command -v python3 >/dev/null 2>&1; then \
	  python3 -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null || missing="$$missing Python 3.10 or newer with venv and pip (found $$(python3 --version 2>&1));"; \
	else missing="$$missing python3 (3.10 or newer);"; fi; \
	if command -v node >/dev/null 2>&1; then \
	  node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || missing="$$missing Node.js 20 or newer (found $$(node --version));"; \
	else missing="$$missing node (Node.js 20 or newer);"; fi; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm;"; \
	if [ -n "$$missing" ]; then echo "make: missing prerequisites:$$missing see README.md, Two commands" >&2; exit 1; fi

demo: prereqs build $(DEMO)/runners.toml demo-python demo-typescript
	@echo "== openagents runners   (registry: $(DEMO)/runners.toml)"
	@OPENAGENTS_RUNNERS=$(DEMO)/runners.toml $(BIN) runners
	@echo
	@echo "== openagents run --runner echo \"hello world\""
	@OPENAGENTS_RUNNERS=$(DEMO)/runners.toml $(BIN) run --runner echo "hello world"
	@echo
	@echo "== openagents run --json --runner echo \"hello world\""
	@OPENAGENTS_RUNNERS=$(DEMO)/runners.toml $(BIN) run --json --runner echo "hello world"
	@echo
	@echo "== openagents validate Turn $(SAMPLES)/turn.json"
	@$(BIN) validate Turn $(SAMPLES)/turn.json && echo "valid (exit 0)"
	@echo
	@echo "== openagents validate RpcRequest $(SAMPLES)/status-request.json"
	@$(BIN) validate RpcRequest $(SAMPLES)/status-request.json && echo "valid (exit 0)"
	@echo
	@echo "== openagents validate Event $(SAMPLES)/event.json"
	@$(BIN) validate Event $(SAMPLES)/event.json && echo "valid (exit 0)"
	@echo
	@echo "== openagents validate Turn $(SAMPLES)/turn-smuggled.json   (a turn trying to smuggle an executable)"
	@$(BIN) validate Turn $(SAMPLES)/turn-smuggled.json; code=$$?; echo "refused (exit $$code)"; test $$code -eq 1
	@echo
	@echo "== echo '{\"a\":' | openagents validate Turn   (not JSON)"
	@echo '{"a":' | $(BIN) validate Turn; code=$$?; echo "refused (exit $$code)"; test $$code -eq 2

test: prereqs test-rust test-python test-typescript test-conformance-langs test-published test-acp-editor test-acp-agents test-web test-standards test-postgres test-publish

# A TypeScript runner, and one turn driven from TypeScript over stdio.
demo-typescript: build
	@cd clients/typescript && npm ci --no-audit --no-fund --silent && npm run --silent build
	@mkdir -p $(DEMO)
	@printf '[capabilities.server]\nenabled = true\n' > $(DEMO)/config-ts.toml
	@printf '[runners.echo-ts]\ncommand = "%s"\nargs = ["%s"]\n' "$$(command -v node)" "$(CURDIR)/clients/typescript/examples/echo-runner.mjs" > $(DEMO)/runners-ts.toml
	@echo '== one turn driven from TypeScript through a TypeScript runner (clients/typescript/examples/drive-turn.mjs)'
	@OPENAGENTS_CONFIG=$(DEMO)/config-ts.toml OPENAGENTS_RUNNERS=$(DEMO)/runners-ts.toml OPENAGENTS_BIN=$(CURDIR)/$(BIN) node clients/typescript/examples/drive-turn.mjs --runner echo-ts "hello from typescript"
	@echo

# A Python runner in the same registry, and one turn driven from Python over stdio.
demo-python: build $(DEMO)/runners.toml
	@clients/python/ensure-venv.sh
	@printf '[capabilities.server]\nenabled = true\n' > $(DEMO)/config.toml
	@printf '[runners.py-echo]\ncommand = "%s"\nargs = ["%s"]\n' "$(CURDIR)/.venv/bin/python" "$(CURDIR)/clients/python/examples/echo_runner.py" >> $(DEMO)/runners.toml
	@echo '== openagents run --runner py-echo "hello from a python runner"'
	@OPENAGENTS_RUNNERS=$(DEMO)/runners.toml $(BIN) run --runner py-echo "hello from a python runner"
	@echo
	@echo '== one turn driven from Python (clients/python/examples/drive_turn.py)'
	@OPENAGENTS_CONFIG=$(DEMO)/config.toml OPENAGENTS_RUNNERS=$(DEMO)/runners.toml OPENAGENTS_BIN=$(CURDIR)/$(BIN) .venv/bin/python clients/python/examples/drive_turn.py --runner py-echo "hello from python"
	@echo

test-rust:
	$(CARGO) test --workspace --locked
	$(MAKE) check-codegen

# Suites about the protocol, not about what a runtime keeps, run on the memory store: their tests
# each start servers that must not share one default store (the store has tests of its own).
test-python:
	OPENAGENTS_STORE=memory bash clients/python/run-tests.sh

test-typescript:
	OPENAGENTS_STORE=memory bash clients/typescript/run-tests.sh

# The JSON Schema Test Suite groups through the generated Python and TypeScript (CONFORMANCE.md).
test-conformance-langs: ; bash tests/conformance/langs/run.sh

# The published schemas (ACP v1, MCP 2026-07-28 and 2025-11-25): their generated Python (mypy --strict)
# and TypeScript (tsc --strict) built and loaded, and every generated validator against the jsonschema
# crate, python jsonschema and ajv on a corpus made from the schemas (CONFORMANCE.md).
test-published: ; bash tests/published/langs.sh

# ACP agents as runners: fake agents on the official ACP SDKs through run, serve --http and the WebSocket.
test-acp-agents: ; OPENAGENTS_STORE=memory bash tests/acp-agents/run-tests.sh

# Editors over ACP: the official TypeScript and Python ACP clients drive `openagents acp`.
test-acp-editor:
	OPENAGENTS_STORE=memory bash tests/acp-editor/run-tests.sh

# The web page (GET /) in headless Chromium against serve --http; checks the checked-in bundle.
test-web: ; OPENAGENTS_STORE=memory bash tests/web/run-tests.sh

# Standard clients against the real server: a strict JSON-RPC 2.0 client, an EventSource-style
# reader of GET /events, the probes, and the Prometheus text-format parser on GET /metrics.
test-standards: ; OPENAGENTS_STORE=memory bash tests/standards/run-tests.sh

# The PostgreSQL store against a real server: a temporary cluster (initdb) on 127.0.0.1, started
# and stopped by the script (Debian's postgresql installed when missing), the Rust tests of
# crates/cli/tests/postgres.rs run with OPENAGENTS_TEST_POSTGRES set to it.
test-postgres: ; bash tests/postgres/run-tests.sh

# The publishable crates (the generator and the runtime generated Rust depends on) packaged and
# built from their packages alone, as crates.io would: every file they need inside, every
# dependency a version range crates.io can resolve.
PUBLISHED_CRATES := openagents-rt openagents-codegen openagents-rpc
test-publish:
	$(CARGO) publish --dry-run --locked --allow-dirty $(addprefix -p ,$(PUBLISHED_CRATES))

# The generator's checked-in output must match what it generates now.
check-codegen:
	$(CARGO) run --quiet --locked -p openagents-codegen -- check
	$(CARGO) run --quiet --locked -p openagents-codegen -- gate

codegen:
	$(CARGO) run --quiet -p openagents-codegen -- python --schema schema --out-dir clients/python/src/openagents/_generated --error-root OpenAgentsError
	$(CARGO) run --quiet -p openagents-codegen -- typescript --schema schema --out-dir clients/typescript/src/generated --runtime ../rt.js --error-base ../error.js
	INSTA_UPDATE=always $(CARGO) test --quiet -p openagents-codegen --test snapshots --test openrpc --test compat_history --test service
	$(CARGO) run --quiet -p openagents-codegen -- check

compat:
	$(CARGO) run --quiet --locked -p openagents-codegen -- compat $(OLD) $(NEW)

fuzz:
	bash tests/fuzz/run.sh

soak:
	bash tests/hardening/soak.sh

bench:
	$(CARGO) bench -p openagents-protocol
	$(CARGO) build --release -p openagents-runner
	$(CARGO) bench -p openagents-runner --bench host
	bash crates/server/benches/run.sh
	$(MAKE) bench-store
	$(MAKE) bench-rpc
	$(MAKE) bench-published

# The store benchmark (BENCHMARKS.md): memory, SQLite, and PostgreSQL on loopback (a temporary
# server, as make test-postgres starts one, fsync on).
bench-store:
	$(CARGO) build --release --locked -p openagents-runner
	bash tests/postgres/run-tests.sh --run bash -c 'STORE_BENCH_POSTGRES=$$OPENAGENTS_TEST_POSTGRES $(CARGO) run --release --locked -p openagents-server --example oa-store-bench'

# The kv example served by openagents-rpc over HTTP against a jsonrpsee server of the same methods,
# side by side in one run (BENCHMARKS.md). BENCH_RPC_ROUNDS, BENCH_RPC_SECONDS, BENCH_RPC_CONNECTIONS,
# BENCH_RPC_KEYS, BENCH_RPC_MIX, BENCH_RPC_WARMUP and BENCH_RPC_PIN set the load (tests/bench-rpc).
# At nice -20 when allowed (root), as crates/server/benches/run.sh runs its servers.
bench-rpc:
	$(CARGO) build --release --locked -p openagents-bench-rpc
	@if nice -n -20 true 2>/dev/null; then prio="nice -n -20"; else prio=""; fi; $$prio target/release/oa-rpc-bench

# The generated code of the vendored ACP and MCP schemas against the peers a user would choose, on
# the same documents (tests/bench-published/corpus.json): Rust against serde_json::Value +
# jsonschema and the typed decode alone, TypeScript against ajv, Python against
# datamodel-code-generator's models. PUBLISHED_BENCH_SECONDS sets each timing loop's time per set.
bench-published:
	$(CARGO) build --locked -p openagents-codegen
	@[ -x clients/typescript/node_modules/.bin/tsc ] || (cd clients/typescript && npm ci --no-audit --no-fund --silent)
	@clients/python/ensure-venv.sh
	$(CARGO) bench --locked -p openagents-bench-published
	OPENAGENTS_CODEGEN=$(CURDIR)/target/debug/openagents-codegen node tests/bench-published/ts/bench.mjs
	OPENAGENTS_CODEGEN=$(CURDIR)/target/debug/openagents-codegen .venv/bin/python tests/bench-published/py/bench.py

clean:
	$(CARGO) clean
