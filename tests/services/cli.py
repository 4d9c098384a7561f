"""The `gateway` command line, run as an operator would: `python -m gateway ...` in a
subprocess, in a working directory of its own, with only the settings it is given."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def last_line(self) -> str:
        lines = self.stdout.strip().splitlines()
        assert lines, f"no output; stderr: {self.stderr}"
        return lines[-1].strip()

    def __str__(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}--- stderr\n{self.stderr}"


@dataclass
class Cli:
    workdir: Path
    env: dict[str, str]

    @property
    def database_url(self) -> str:
        return self.env["GATEWAY_DATABASE_URL"]

    async def __call__(self, *args: str, **env: str) -> Result:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            *args,
            cwd=self.workdir,
            env=self.env | env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await process.communicate()
        assert process.returncode is not None
        return Result(process.returncode, stdout.decode(), stderr.decode())
