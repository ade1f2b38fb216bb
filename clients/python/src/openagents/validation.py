"""Checking documents against the schema: every violation, with its JSON pointer and keyword.

`validate(type_name, document)` holds a decoded JSON document to the schema of a named type
exactly, as the Rust validator (`openagents validate`) does: an unknown event kind or enum value is
refused here, although a client reading the same document keeps it as an explicit unknown value.
Violations use the Rust validator's conventions (see `tests/vectors/README.md`).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from . import _rt
from ._generated import models as m

__all__ = ["DocumentInvalid", "check", "pointer", "type_names", "validate", "violations"]


class DocumentInvalid(_rt.OpenAgentsError, ValueError):
    """A document breaks its schema; `violations` lists every way it does."""

    def __init__(self, type_name: str, violations: list[m.Violation]) -> None:
        lines = "; ".join(f"{v.pointer or '(root)'}: {v.message}" for v in violations)
        super().__init__(f"not a valid {type_name}: {lines}")
        self.type_name = type_name
        self.violations = violations


def pointer(loc: tuple[str | int, ...]) -> str:
    """A pydantic location as a JSON pointer (RFC 6901)."""
    return _rt.json_pointer(loc)


def _ours(found: list[_rt.Violation]) -> list[m.Violation]:
    # The runtime's violations as the schema's own `Violation` model.
    return [m.Violation(pointer=v.pointer, keyword=v.keyword, message=v.message) for v in found]


def violations(error: ValidationError) -> list[m.Violation]:
    """Every error pydantic found, as a violation: pointer, keyword and message."""
    return _ours(_rt.violations(error))


def type_names() -> list[str]:
    """The names `validate` knows, in name order."""
    return sorted(m.TYPES)


def _adapter(type_name: str) -> TypeAdapter[Any]:
    # `KeyError` (`_rt.UnknownTypeName`) naming the known types, for a name the schema lacks.
    return _rt.adapter(m.TYPES, type_name)


def validate(type_name: str, document: object) -> list[m.Violation]:
    """Checks a decoded JSON document against the named type strictly; `[]` when it is valid."""
    return _ours(_rt.validate(m.TYPES, type_name, document))


def validate_json(type_name: str, text: str | bytes) -> list[m.Violation]:
    """`validate` for JSON text (pydantic's own parser: nothing after the value)."""
    return _ours(_rt.validate_json(m.TYPES, type_name, text))


def check(type_name: str, document: object) -> Any:
    """Validates a document strictly and returns it as its model; raises `DocumentInvalid`."""
    try:
        return _adapter(type_name).validate_python(document, context=_rt.STRICT)
    except ValidationError as e:
        raise DocumentInvalid(type_name, violations(e)) from None
