"""Benchmark (not a test): the pydantic models generated from the vendored ACP v1 and MCP 2026-07-28
schemas by openagents-codegen against the pydantic v2 models datamodel-code-generator generates from
the same files, on the documents of tests/bench-published/corpus.json, side by side in one run.

    .venv/bin/python tests/bench-published/py/bench.py [--seconds S]      (from the workspace root)

Setup, done by the script: `openagents-codegen python` (target/debug, else target/release;
$OPENAGENTS_CODEGEN overrides) writes our models into target/bench-published/py/ours/<module>/;
datamodel-code-generator (pinned below, pip-installed with `pip --target` into
target/bench-published/dmcg, run from there) writes its models into
target/bench-published/py/dmcg_<module>.py (`--output-model-type pydantic_v2.BaseModel`), and with
`--extra-fields allow` (unknown members kept, as ours keep them; its default ignores them) into
dmcg_allow_<module>.py. All run on the venv's pydantic. What is timed, per document, on the same
parsed `dict`s (and the same JSON texts):

    ours validate         models.validate("T", doc): the check (violations, no models kept)
    ours models strict    TypeAdapter(models.TYPES["T"]).validate_python(doc, context=_rt.STRICT)
    ours models lenient   TypeAdapter(models.TYPES["T"]).validate_python(doc)
    dmcg                  T.model_validate(doc)
    ours validate_json    models.validate_json("T", text)
    ours models JSON      TypeAdapter(...).validate_json(text, context=_rt.STRICT)
    dmcg json             T.model_validate_json(text)
    dmcg keeping     the same two with the models of `--extra-fields allow` (no target: a reading)

round-robin in short batches with the order rotating each round. Times are the median (and 10th
percentile) of the batches; a ratio is the median of the ratios of the same round's batches, with
the ratio of the 10th percentiles beside it. Every model must accept every document before
anything is timed.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DMCG_VERSION = "0.97.0"

ROOT = Path(__file__).resolve().parents[3]
WORK = ROOT / "target/bench-published"
MODULES = {"acp-v1": "acp_v1", "mcp-2026-07-28": "mcp_2026_07_28"}


def codegen() -> Path:
    env = os.environ.get("OPENAGENTS_CODEGEN")
    if env:
        return Path(env)
    for p in (ROOT / "target/debug/openagents-codegen", ROOT / "target/release/openagents-codegen"):
        if p.exists():
            return p
    sys.exit("no openagents-codegen binary: run `cargo build -p openagents-codegen` first")


def setup(schemas: list[str]) -> None:
    dmcg = WORK / "dmcg"
    have = list(dmcg.glob(f"datamodel_code_generator-{DMCG_VERSION}.dist-info"))
    if not have:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--upgrade",
                "--target",
                str(dmcg),
                f"datamodel-code-generator=={DMCG_VERSION}",
            ],
            check=True,
        )
    out = WORK / "py"
    (out / "ours").mkdir(parents=True, exist_ok=True)
    for schema in schemas:
        src = ROOT / "tests/third-party-schemas" / f"{schema}.schema.json"
        module = MODULES[schema]
        subprocess.run(
            [str(codegen()), "python", "--schema", str(src), "--out-dir", str(out / "ours" / module)], check=True
        )
        for prefix, extra in (("dmcg", []), ("dmcg_allow", ["--extra-fields", "allow"])):
            dmcg_models(src, out / f"{prefix}_{module}.py", extra, schema)


def dmcg_models(src: Path, target: Path, extra: list[str], schema: str) -> None:
    """datamodel-code-generator's pydantic v2 models of `src` in `target`, with `extra` options."""
    r = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-m",
            "datamodel_code_generator",
            "--input",
            str(src),
            "--input-file-type",
            "jsonschema",
            "--output-model-type",
            "pydantic_v2.BaseModel",
            "--target-python-version",
            "3.11",
            "--disable-timestamp",
            "--output",
            str(target),
            *extra,
        ],
        env={**os.environ, "PYTHONPATH": str(WORK / "dmcg"), "PYTHONWARNINGS": "ignore"},
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        sys.exit(f"datamodel-code-generator {DMCG_VERSION} cannot handle {schema}:\n{r.stderr}")


def load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def accepts(f: Callable[[Any], Any], doc: Any) -> bool:
    try:
        f(doc)
    except Exception:
        return False
    return True


def timings(cases: list[Callable[[], None]], seconds: float, docs: int) -> list[list[float]]:
    """ns per document of each case in each round of round-robin batches of about 5 ms (one batch
    per case a round, so the cases' lists line up round by round)."""
    slowest = 0.0
    for f in cases:
        t, n = time.perf_counter(), 0
        while time.perf_counter() - t < 0.2:
            f()
            n += 1
        slowest = max(slowest, (time.perf_counter() - t) / n)
    iters = max(1, round(0.005 / slowest))
    rounds = max(21, int(seconds / (0.005 * len(cases))))
    samples: list[list[float]] = [[] for _ in cases]
    for r in range(rounds):
        for k in range(len(cases)):
            c = (r + k) % len(cases)
            f = cases[c]
            t = time.perf_counter_ns()
            for _ in range(iters):
                f()
            samples[c].append((time.perf_counter_ns() - t) / (iters * docs))
    return samples


def summary(samples: list[float]) -> tuple[float, float]:
    """Median and 10th percentile."""
    s = sorted(samples)
    return s[len(s) // 2], s[len(s) // 10]


def fmt(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms" if ns >= 1e6 else f"{ns / 1e3:.2f} µs" if ns >= 1e3 else f"{ns:.0f} ns"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("PUBLISHED_BENCH_SECONDS", "3")))
    args = ap.parse_args()
    corpus = json.loads((ROOT / "tests/bench-published/corpus.json").read_text(encoding="utf-8"))
    schemas = sorted({s["schema"] for s in corpus["sets"]})
    setup(schemas)

    import pydantic
    from openagents import _rt
    from pydantic import TypeAdapter

    sys.path.insert(0, str(WORK / "py/ours"))
    ours = {s: importlib.import_module(f"{MODULES[s]}.models") for s in schemas}
    theirs = {s: load(WORK / f"py/dmcg_{MODULES[s]}.py", f"dmcg_{MODULES[s]}") for s in schemas}
    keeping = {s: load(WORK / f"py/dmcg_allow_{MODULES[s]}.py", f"dmcg_allow_{MODULES[s]}") for s in schemas}

    print(f"Python {platform.python_version()}, pydantic {pydantic.VERSION}, ", end="")
    print(f"datamodel-code-generator {DMCG_VERSION}; {args.seconds} s per set")
    print(f"{machine_load()} at the start, {time.strftime('%H:%M:%S', time.gmtime())} UTC")
    print("ns per document, median (p10); ratios are dmcg / ours (target >= 1: ours no slower);")
    print("'dmcg keeping' is datamodel-code-generator with --extra-fields allow: unknown members kept, as ours")
    print(
        "| set | docs | ours `validate` | ours models strict | ours models lenient | dmcg `model_validate`"
        " | dmcg / ours `validate` | dmcg / ours models strict | dmcg / ours models lenient"
        " | ours `validate_json` | ours models strict JSON | dmcg JSON | dmcg / ours `validate_json`"
        " | dmcg / ours models JSON | dmcg keeping / ours models strict | dmcg keeping / ours models JSON |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|---|---|---|---|")
    for s in corpus["sets"]:
        schema, type_name = s["schema"], s["type"]
        models = ours[schema]
        adapter: TypeAdapter[Any] = TypeAdapter(models.TYPES[type_name])
        model = getattr(theirs[schema], type_name)
        keeper = getattr(keeping[schema], type_name)
        texts: list[str] = s["docs"]
        docs = [json.loads(t) for t in texts]

        def check(d: Any, m: Any = models, name: str = type_name) -> None:
            if m.validate(name, d):
                raise ValueError("violations")

        def check_json(t: str, m: Any = models, name: str = type_name) -> None:
            if m.validate_json(name, t):
                raise ValueError("violations")

        def strict(d: Any, a: TypeAdapter[Any] = adapter) -> Any:
            return a.validate_python(d, context=_rt.STRICT)

        def lenient(d: Any, a: TypeAdapter[Any] = adapter) -> Any:
            return a.validate_python(d)

        def strict_json(t: str, a: TypeAdapter[Any] = adapter) -> Any:
            return a.validate_json(t, context=_rt.STRICT)

        named: dict[str, tuple[Callable[[Any], Any], list[Any]]] = {
            "check": (check, docs),
            "strict": (strict, docs),
            "lenient": (lenient, docs),
            "dmcg": (model.model_validate, docs),
            "check json": (check_json, texts),
            "strict json": (strict_json, texts),
            "dmcg json": (model.model_validate_json, texts),
            "keeping": (keeper.model_validate, docs),
            "keeping json": (keeper.model_validate_json, texts),
        }
        for label, (f, inputs) in named.items():
            refused = [i for i, d in enumerate(inputs) if not accepts(f, d)]
            if refused:
                sys.exit(f"{label} refuses documents {refused} of {s['name']}")
        bad = copy.deepcopy(docs[0])
        if "sessionId" in bad:
            bad["sessionId"] = 7
        else:
            bad["jsonrpc"] = "1.0"
        for label in ("check", "strict", "lenient"):
            if accepts(named[label][0], bad):
                sys.exit(f"ours ({label}) accepts a broken copy of the first document of {s['name']}")
        if accepts(check_json, json.dumps(bad)):
            sys.exit(f"ours (check json) accepts a broken copy of the first document of {s['name']}")
        if accepts(model.model_validate, bad):
            print(f"(note: dmcg accepts a broken copy of the first document of {s['name']})")

        def batch(f: Callable[[Any], Any], inputs: list[Any]) -> Callable[[], None]:
            def run() -> None:
                for d in inputs:
                    f(d)

            return run

        times = timings([batch(f, inputs) for f, inputs in named.values()], args.seconds, len(docs))
        t = dict(zip(named, times, strict=True))

        def cell(label: str, t: dict[str, list[float]] = t) -> str:
            m, p = summary(t[label])
            return f"{fmt(m)} ({fmt(p)})"

        row = [
            s["name"],
            str(len(docs)),
            *map(cell, ("check", "strict", "lenient", "dmcg")),
            ratio(t["dmcg"], t["check"]),
            ratio(t["dmcg"], t["strict"]),
            ratio(t["dmcg"], t["lenient"]),
            *map(cell, ("check json", "strict json", "dmcg json")),
            ratio(t["dmcg json"], t["check json"]),
            ratio(t["dmcg json"], t["strict json"]),
            ratio(t["keeping"], t["strict"], target=False),
            ratio(t["keeping json"], t["strict json"], target=False),
        ]
        print("| " + " | ".join(row) + " |")
    print(f"{machine_load()} at the end, {time.strftime('%H:%M:%S', time.gmtime())} UTC")


def machine_load() -> str:
    """The machine's load average over 1, 5 and 15 minutes, and how many cores it has."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def ratio(theirs: list[float], ours: list[float], target: bool = True) -> str:
    """Their time over ours: the median of the ratios of the same round's batches (which ran
    side by side, so a busier moment of a shared machine slows both), then the ratio of the 10th
    percentiles in brackets; and (`target`) whether ours is no slower."""
    per_round = summary([a / b for a, b in zip(theirs, ours, strict=True)])[0]
    p10 = summary(theirs)[1] / summary(ours)[1]
    verdict = ("met" if per_round >= 1 else "MISSED") if target else ""
    return f"{per_round:.2f}x ({p10:.2f}x) {verdict}".rstrip()


if __name__ == "__main__":
    main()
