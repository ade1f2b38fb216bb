"""Runs a corpus of one published schema through the generated Python and python `jsonschema`.

Usage: python run_python.py CORPUS SCHEMA PACKAGE_ROOT PACKAGE OUT

CORPUS is a file `published-corpus write` made (each document with its `$defs` type, the
generated type's name and its JSON text); SCHEMA the vendored schema; PACKAGE_ROOT/PACKAGE the
generated Python package. Each document is checked by:

- `python`: the generated `models.validate(key, document)` (the type by its `$defs` key) on
  `json.loads` of the text (the models validated strictly, as `openagents.validation` does); valid
  when it lists no violation;
- `python-json`: the same models through pydantic's own JSON parser on the text
  (`TypeAdapter(models.TYPES[name]).validate_json(text, context=_rt.STRICT)`);
- `python-check-json`: the generated `models.validate_json(key, text)`, the check that makes
  no model, on the text; valid when it lists no violation;
- `python-jsonschema`: the `jsonschema` package, Draft 2020-12, formats as annotations, against
  the schema's `$defs` with a root of `{"$ref": "#/$defs/<type>"}`.

Writes OUT: `{"verdicts": [{validator: verdict, ...}, ...]}` in corpus order, a verdict being
`true`, `false` or the text of any other exception.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

import jsonschema
from openagents import _rt
from pydantic import TypeAdapter, ValidationError


def verdict(check: Callable[..., bool], *args: Any) -> bool | str:
    try:
        return check(*args)
    except ValidationError:
        return False
    except Exception as e:  # noqa: BLE001 - any other failure is reported as itself
        return f"{type(e).__name__}: {e}"


def valid_value(models: Any, name: str, value: object) -> bool:
    """Whether the generated `models.validate` finds no violation in the decoded document."""
    return bool(models.validate(name, value) == [])


def valid_text(models: Any, name: str, text: str) -> bool:
    """Whether the generated `models.validate_json` finds no violation in the text."""
    return bool(models.validate_json(name, text) == [])


def accepts(adapter: TypeAdapter[Any], text: str) -> bool:
    """Whether pydantic's own JSON parser and the models, strictly, accept the text (else raises)."""
    adapter.validate_json(text, context=_rt.STRICT)
    return True


def main() -> None:
    corpus_path, schema_path, root, package, out_path = sys.argv[1:6]
    sys.path.insert(0, root)
    with open(corpus_path, encoding="utf-8") as f:
        corpus = json.load(f)
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    models: Any = importlib.import_module(f"{package}.models")
    adapters: dict[str, TypeAdapter[Any]] = {}
    references: dict[str, Any] = {}
    out = []
    for doc in corpus["docs"]:
        name, definition, text = doc["type"], doc["def"], doc["text"]
        if definition not in references:
            pointer = definition.replace("~", "~0").replace("/", "~1")
            references[definition] = jsonschema.Draft202012Validator(
                {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": schema["$defs"], "$ref": f"#/$defs/{pointer}"}
            )
        if name is not None and name not in adapters:
            adapters[name] = TypeAdapter(models.TYPES[name])
        value = json.loads(text)
        verdicts: dict[str, bool | str] = {
            "python-jsonschema": verdict(references[definition].is_valid, value),
        }
        if name is None:
            verdicts["python"] = verdicts["python-json"] = verdicts["python-check-json"] = (
                f"no generated type for `{definition}`"
            )
        else:
            # The entry points by the `$defs` key, as a user of the schema names the type.
            verdicts["python"] = verdict(valid_value, models, definition, value)
            verdicts["python-json"] = verdict(accepts, adapters[name], text)
            verdicts["python-check-json"] = verdict(valid_text, models, definition, text)
        out.append(verdicts)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"verdicts": out}, f)


if __name__ == "__main__":
    main()
