"""Python generated for someone else's schema (`codegen/tests/foreign/notes.schema.json`: two methods,
an error-code enum and the object carrying it) with the generator's defaults: it imports the
installed package's runtime, its error classes derive from the runtime's `TypedError` (not from this
package's `OpenAgentsError`), and it type-checks with `mypy --strict`."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from openagents import OpenAgentsError, _rt

from .conftest import REPO, generate_python

SCHEMA = REPO / "codegen" / "tests" / "foreign" / "notes.schema.json"


def generate(root: Path) -> None:
    generate_python(SCHEMA, root / "notes_gen")


def test_error_classes_of_another_schema_derive_from_the_runtime_root(tmp_path: Path) -> None:
    generate(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        models = importlib.import_module("notes_gen.models")
        errors = importlib.import_module("notes_gen.errors")
        full = errors.exception_for(models.NotesError.from_wire({"code": "full", "message": "no room"}))
        assert (
            type(full).__name__ == "FullError"
            and full.retryable
            and full.rpc_code == -32051
            and full.message == "no room"
        )
        assert isinstance(full, errors.NotesException) and isinstance(full, _rt.TypedError)
        assert not isinstance(full, OpenAgentsError), "another schema's errors are not this package's"
        unknown = errors.exception_for(models.NotesError.model_construct(code="from_a_newer_server", message="?"))
        assert type(unknown) is errors.NotesException and not unknown.retryable
        text = (tmp_path / "notes_gen" / "errors.py").read_text()
        assert "OpenAgentsError" not in text and "class NotesException(_rt.TypedError):" in text
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == "notes_gen" or n.startswith("notes_gen.")]:
            del sys.modules[name]


def test_code_generated_for_another_schema_passes_mypy_strict(tmp_path: Path) -> None:
    generate(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "-p", "notes_gen"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
