"""Runs every case of the manifest through the Python generated for its group.

Usage: python run_python.py MANIFEST PACKAGE_ROOT

PACKAGE_ROOT holds `conformance_groups/<module>/models.py` for each group. Each case's JSON text
goes through the four ways the generated Python checks a document against a named type, all in the
strict context: reading it into the models (`validate`: pydantic's `validate_python` on the decoded
value; `validate_json`: pydantic's own JSON parser), and the check that makes no model, which the
generated `validate` and `validate_json` run (`check`, `check_json`: `_rt.checker`). Prints one
JSON object: for each group's module, one entry per case mapping each path to its verdict: `true`
(valid), `false` (invalid) or the text of any other exception.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from openagents import _rt
from pydantic import TypeAdapter, ValidationError


def verdict(check: Any, *args: Any) -> bool | str:
    try:
        check(*args, context=_rt.STRICT)
    except ValidationError:
        return False
    except Exception as e:  # noqa: BLE001 - any other failure is reported as itself
        return f"{type(e).__name__}: {e}"
    return True


def main() -> None:
    manifest_path, root = sys.argv[1], sys.argv[2]
    sys.path.insert(0, root)
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    out: dict[str, list[dict[str, bool | str]]] = {}
    for group in manifest["groups"]:
        if group["python_refusal"] is not None:
            continue
        module = group["module"]
        try:
            models = importlib.import_module(f"conformance_groups.{module}.models")
            adapter: TypeAdapter[Any] = _rt.adapter(models.TYPES, group["root"])
            checker = _rt.checker(models.TYPES, group["root"])
        except Exception as e:  # noqa: BLE001
            failure = f"cannot load the generated module: {type(e).__name__}: {e}"
            out[module] = [{"load": failure} for _ in group["cases"]]
            continue
        results = []
        for case in group["cases"]:
            text = case["data"]
            document = json.loads(text)
            results.append(
                {
                    "validate": verdict(adapter.validate_python, document),
                    "validate_json": verdict(adapter.validate_json, text),
                    "check": verdict(checker.validate_python, document),
                    "check_json": verdict(checker.validate_json, text),
                }
            )
        out[module] = results
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
