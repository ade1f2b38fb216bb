# openagents — entry points. Every target installs what it needs itself.
#   make demo      build, run a turn through the echo runner, validate sample documents and show refused ones
#   make test      everything CI runs
#   make codegen   regenerate checked-in generated files (snapshots of the generator's output)
#   make bench     benchmarks (not part of make test)

CARGO ?= cargo
BIN := target/debug/openagents
SAMPLES := tests/samples

.PHONY: all build demo test codegen check-codegen bench clean

all: build

build:
	$(CARGO) build --locked -p openagents-cli -p openagents-runner

# A runner registry under the repository (never the user's own), holding the example runner.
DEMO := target/demo
$(DEMO)/runners.toml: build
	@mkdir -p $(DEMO)
	@printf '[runners.echo]\ncommand = "%s"\n' "$(CURDIR)/target/debug/openagents-runner-echo" > $@

demo: build $(DEMO)/runners.toml
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

test:
	$(CARGO) test --workspace --locked
	$(MAKE) check-codegen

# The generator's checked-in output must match what it generates now.
check-codegen:
	$(CARGO) run --quiet --locked -p openagents-codegen -- check

codegen:
	INSTA_UPDATE=always $(CARGO) test --quiet -p openagents-codegen --test snapshots
	$(CARGO) run --quiet -p openagents-codegen -- check

bench:
	$(CARGO) bench -p openagents-protocol

clean:
	$(CARGO) clean
