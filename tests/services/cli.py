"""The `gateway` command line, run as an operator would: `python -m gateway ...` in a
subprocess, in a working directory of its own, with only the settings it is given."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.services.net import free_port


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
        return await self._run(args, env, within=None)

    async def serve_until_it_exits(self, *, within: float = 60, **env: str) -> Result:
        """`gateway serve` that must refuse to start: one still running (listening) after
        `within` seconds is killed, and the test fails."""
        env = {"GATEWAY_PORT": str(free_port())} | env
        return await self._run(("serve",), env, within=within)

    async def _run(
        self, args: tuple[str, ...], env: dict[str, str], within: float | None
    ) -> Result:
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
        try:
            async with asyncio.timeout(within):
                stdout, stderr = await process.communicate()
        except TimeoutError:
            process.kill()
            await process.communicate()
            raise AssertionError(f"gateway {' '.join(args)} still ran after {within} s") from None
        assert process.returncode is not None
        return Result(process.returncode, stdout.decode(), stderr.decode())
