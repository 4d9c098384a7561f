"""The client installs on its own: a fresh virtualenv gets httpx and pydantic, and none of
the server's dependencies."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "client"
SERVER_ONLY = ["slack-bolt", "discord.py", "aiosmtplib", "aioimaplib", "fastapi", "sqlalchemy"]


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_the_client_installs_without_the_servers_dependencies(tmp_path: Path) -> None:
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    installed = run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", CLIENT)
    assert installed.returncode == 0, installed.stderr[-3000:]
    for name in SERVER_ONLY:
        shown = run(python, "-m", "pip", "show", name)
        assert shown.returncode != 0, f"{name} was installed with the client:\n{shown.stdout}"
    assert run(python, "-m", "pip", "show", "httpx", "pydantic").returncode == 0
    script = "import hitl_client; print(hitl_client.__version__, hitl_client.__file__)"
    imported = run(python, "-c", script)
    assert imported.returncode == 0, imported.stderr
    version, where = imported.stdout.split()
    assert version == "0.1.0" and where.startswith(str(tmp_path))  # the venv's own copy
