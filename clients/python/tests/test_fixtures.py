"""The generator on its fixture schemas (`codegen/tests/fixtures/`, one feature each): the Python it
emits imports, is already `ruff format`-clean, and passes `mypy --strict`; and the modules checked
in under `openagents/_generated` are what the generator makes from `schema/` now."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import PYTHON_DIR, REPO, binary

FIXTURES = sorted((REPO / "codegen" / "tests" / "fixtures").glob("*.json"))
VENV_BIN = Path(sys.executable).parent


def generate(schema_dir: Path, out: Path, *options: str) -> None:
    codegen = binary("openagents-codegen")
    done = subprocess.run(
        [str(codegen), "python", "--schema", str(schema_dir), "--out-dir", str(out), *options],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def fixture_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package `fx` holding `_rt` and one generated subpackage per fixture schema."""
    root = tmp_path_factory.mktemp("fixtures")
    pkg = root / "fx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(PYTHON_DIR / "src" / "openagents" / "_rt.py", pkg / "_rt.py")
    for fixture in FIXTURES:
        schema = root / "schemas" / fixture.stem
        schema.mkdir(parents=True)
        shutil.copy(fixture, schema / fixture.name)
        generate(schema, pkg / fixture.stem)
    return root


def test_there_are_fixtures() -> None:
    assert len(FIXTURES) >= 10


@pytest.mark.parametrize("fixture", [f.stem for f in FIXTURES])
def test_fixture_modules_import(fixture_package: Path, fixture: str) -> None:
    sys.path.insert(0, str(fixture_package))
    try:
        models = importlib.import_module(f"fx.{fixture}.models")
        for name, annotation in models.TYPES.items():
            from pydantic import TypeAdapter

            TypeAdapter(annotation)  # every type builds its validator
            assert name
        for extra in ("methods", "errors", "constants"):
            if (fixture_package / "fx" / fixture / f"{extra}.py").exists():
                importlib.import_module(f"fx.{fixture}.{extra}")
    finally:
        sys.path.remove(str(fixture_package))


def test_fixture_modules_are_formatted_and_type_check(fixture_package: Path) -> None:
    fmt = subprocess.run(
        [str(VENV_BIN / "ruff"), "format", "--check", "--line-length", "120", str(fixture_package / "fx")],
        capture_output=True,
        text=True,
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    typed = subprocess.run(
        [str(VENV_BIN / "mypy"), "--strict", "--python-version", "3.10", "--no-incremental", "-p", "fx"],
        capture_output=True,
        text=True,
        cwd=fixture_package,
        env={"MYPYPATH": str(fixture_package), "PATH": "/usr/bin:/bin"},
    )
    assert typed.returncode == 0, typed.stdout + typed.stderr


def test_checked_in_modules_are_fresh(tmp_path: Path) -> None:
    # As `make codegen` generates this package's own modules: its errors derive from OpenAgentsError.
    generate(REPO / "schema", tmp_path, "--error-root", "OpenAgentsError")
    checked_in = PYTHON_DIR / "src" / "openagents" / "_generated"
    fresh = {p.name: p.read_text() for p in tmp_path.glob("*.py")}
    current = {p.name: p.read_text() for p in checked_in.glob("*.py")}
    assert fresh == current, "the generated Python is stale: run `make codegen`"
