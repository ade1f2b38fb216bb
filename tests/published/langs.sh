#!/usr/bin/env bash
# What `make test-published` runs: the Python and TypeScript generated from each vendored
# published schema (tests/third-party-schemas/: ACP v1, MCP 2026-07-28 and 2025-11-25), built,
# type-checked and loaded, then every validator on the corpus of each schema compared with the
# verdict of record (the `jsonschema` crate's).
#
# 1. `openagents-codegen python` and `typescript` for each schema, into target/published/py/<module>/
#    and target/published/ts/src/<module>/ (beside a copy of the client's rt.ts, which the
#    generated TypeScript imports as "../rt.js");
# 2. `mypy --strict` (with pydantic's plugin) on the Python, which imports `openagents._rt` from the
#    repository's virtualenv; `tsc --strict` on the TypeScript (emitting the JavaScript the runner
#    loads; a type error fails the run);
# 3. `published-corpus write`: the corpus of each schema (valid instances and their mutations);
# 4. langs/run_python.py (the generated models, and python `jsonschema`) and
#    langs/run_typescript.mjs (the generated validators, and ajv) on each corpus;
# 5. `published-corpus compare`: with the generated Rust's verdicts too, every validator against
#    the verdict of record, the known-disagreements list, and CONFORMANCE.md's table.
#
# Sets up what it needs when it is missing: the virtualenv (clients/python/ensure-venv.sh), the
# TypeScript client's packages (`npm ci`; ajv and tsc come from there), and python `jsonschema`
# at the versions requirements-reference.txt pins, in target/published/pydeps.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
here="$root/tests/published"
venv="${OPENAGENTS_VENV:-$root/.venv}"
out="$root/target/published"
deps="$out/pydeps"
client_ts="$root/clients/typescript"
schemas=(acp-v1 mcp-2026-07-28 mcp-2025-11-25)
module() { echo "${1//-/_}"; }
started=$SECONDS
step() { echo "== $* ($((SECONDS - started))s)"; }

if [ ! -x "$venv/bin/python" ]; then clients/python/ensure-venv.sh; fi
if [ ! -d "$client_ts/node_modules/typescript" ] || [ ! -d "$client_ts/node_modules/ajv" ]; then
    (cd "$client_ts" && npm ci --no-audit --no-fund --silent)
fi
pinned="$(sed -n 's/^jsonschema==//p' "$here/requirements-reference.txt")"
if [ "$(PYTHONPATH="$deps" "$venv/bin/python" -c 'import jsonschema, importlib.metadata as m; print(m.version("jsonschema"))' 2>/dev/null)" != "$pinned" ]; then
    rm -rf "$deps"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$deps" -r "$here/requirements-reference.txt"
fi

step "building the generator and published-corpus"
cargo build --quiet --locked -p openagents-codegen --bin openagents-codegen -p openagents-published --bin published-corpus
codegen="$root/target/debug/openagents-codegen"
corpus_bin="$root/target/debug/published-corpus"

rm -rf "$out/py" "$out/ts/src" "$out/ts/dist" "$out/corpus"
mkdir -p "$out/py" "$out/ts/src" "$out/corpus"
step "generating Python and TypeScript"
for s in "${schemas[@]}"; do
    m="$(module "$s")"
    # A method file beside the schema declares the methods of a schema that marks none (MCP).
    methods=()
    [ -f "tests/third-party-schemas/$s.methods.json" ] && methods=(--methods "tests/third-party-schemas/$s.methods.json")
    "$codegen" python --schema "tests/third-party-schemas/$s.schema.json" "${methods[@]}" --out-dir "$out/py/$m"
    "$codegen" typescript --schema "tests/third-party-schemas/$s.schema.json" "${methods[@]}" --out-dir "$out/ts/src/$m" --runtime ../rt.js
done
cp "$client_ts/src/rt.ts" "$out/ts/src/rt.ts"
printf '{ "type": "module" }\n' > "$out/ts/package.json"
cat > "$out/ts/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "lib": ["ES2022"], "types": [],
    "strict": true, "noImplicitOverride": true, "noFallthroughCasesInSwitch": true, "verbatimModuleSyntax": true,
    "rootDir": "src", "outDir": "dist", "newLine": "lf", "skipLibCheck": false
  },
  "include": ["src/**/*.ts"]
}
JSON
cat > "$out/py/mypy.ini" <<'INI'
[mypy]
strict = True
python_version = 3.10
plugins = pydantic.mypy
explicit_package_bases = True
INI

step "mypy --strict on the generated Python"
(cd "$out/py" && "$venv/bin/mypy" --config-file mypy.ini --cache-dir "$out/mypy-cache" $(for s in "${schemas[@]}"; do module "$s"; done))
step "tsc --strict on the generated TypeScript"
(cd "$out/ts" && node "$client_ts/node_modules/typescript/bin/tsc" -p tsconfig.json)

step "the corpus"
"$corpus_bin" write "$out/corpus"

step "the generated Python and python jsonschema on the corpus"
for s in "${schemas[@]}"; do
    PYTHONPATH="$deps" "$venv/bin/python" "$here/langs/run_python.py" "$out/corpus/$s.json" "tests/third-party-schemas/$s.schema.json" \
        "$out/py" "$(module "$s")" "$out/corpus/python-$s.json" &
done
wait_all() { local failed=0; for p in $(jobs -p); do wait "$p" || failed=1; done; return $failed; }
step "the generated TypeScript and ajv on the corpus"
for s in "${schemas[@]}"; do
    node "$here/langs/run_typescript.mjs" "$out/corpus/$s.json" "tests/third-party-schemas/$s.schema.json" \
        "$out/ts/dist/$(module "$s")/validators.js" "$client_ts/node_modules/ajv" "$out/corpus/typescript-$s.json"
done
wait_all

step "comparing every validator with the verdict of record"
"$corpus_bin" compare "$out/corpus"
step "done"
