"""Running an example of examples/ as a user runs it: a subprocess with the two HUMANLAYER_*
variables and no LLM key, against a live gateway; killed if a test leaves it running."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.helpers import eventually
from tests.services.inprocess import RunningGateway

EXAMPLES = Path(__file__).parents[2] / "examples"
LLM_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


@asynccontextmanager
async def example(
    name: str, gateway: RunningGateway, key: str, *args: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {**os.environ, "HUMANLAYER_API_BASE": gateway.api_base, "HUMANLAYER_API_KEY": key}
    for llm_key in LLM_KEYS:
        env.pop(llm_key, None)  # it must need none
    script = await asyncio.create_subprocess_exec(
        *(sys.executable, str(EXAMPLES / name), *args),
        env=env,  # the working directory is the test's tmp_path
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        yield script
    finally:
        if script.returncode is None:
            script.kill()
            await script.wait()


async def first_line(script: asyncio.subprocess.Process, pattern: str) -> re.Match[str]:
    """The script's first line, which must match `pattern` (it says what it waits for)."""
    assert script.stdout is not None
    line = (await script.stdout.readline()).decode()
    found = re.search(pattern, line)
    assert found, line
    return found


async def finish(script: asyncio.subprocess.Process) -> str:
    """The rest of what the script prints; it must exit 0."""
    assert script.stdout is not None
    output = (await script.stdout.read()).decode()
    assert await script.wait() == 0, output
    return output


async def created(gateway: RunningGateway, call_id: str) -> None:
    """Once the request the script announced exists (it may say so before it asks)."""
    async with gateway.client() as admin:

        async def found() -> bool:
            return (await admin.get(f"/function_calls/{call_id}")).status_code == 200

        await eventually(found)
