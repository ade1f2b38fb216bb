"""The package installs from `clients/python` into a fresh virtual environment (not editable, no
dev requirements), and the README's Python example runs there against `openagents serve --http`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import HttpServer

REPO = Path(__file__).resolve().parents[3]


def readme_example() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Python") : text.index("## TypeScript")]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the README's Python section has a ```python example"
    return found.group(1)


def test_a_fresh_install_runs_the_readme_example(http_server: HttpServer, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(REPO / "clients" / "python")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr
    # Installed, not found through the source tree: the import resolves inside the venv.
    where = subprocess.run(
        [str(py), "-c", "import openagents; print(openagents.__file__)"], capture_output=True, text=True, cwd=tmp_path
    )
    assert where.returncode == 0, where.stderr
    assert str(venv) in where.stdout, where.stdout
    example = tmp_path / "example.py"
    example.write_text(readme_example())
    env = {**os.environ, "OPENAGENTS_URL": http_server.url, "OPENAGENTS_TOKEN_FILE": http_server.token_file}
    env.pop("PYTHONPATH", None)
    run = subprocess.run([str(py), str(example)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == "hello world", run.stdout
    kinds = [line.split()[1] for line in lines[:-1]]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed", run.stdout
    assert "SchemaMismatch" not in run.stderr, run.stderr
