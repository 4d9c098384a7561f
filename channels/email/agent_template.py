"""An agent's own email template (`spec.channel.email.template`), rendered in a process of
its own on a budget of time and output.

A sandboxed template can still loop for hours (`range` is allowed): rendered on the event
loop, or in one of its threads, it would freeze or starve the gateway, and a retried job
would do it again after every restart. A child process can be killed when its time is up.
Run as `python -m channels.email.agent_template`: a JSON job on stdin, the HTML on stdout.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from gateway.errors import DeliveryError

SECONDS = 2.0  # wall time for one render, the interpreter's start included
OUTPUT_LIMIT = 200_000  # characters of HTML
REFUSED = 2  # exit status: the sandbox refused the template (the caller uses its own)
TOO_LONG = 3  # exit status: the output went past its limit


class OverBudget(DeliveryError):
    """The template ran past its time or output budget: the delivery fails for good."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


async def render(template: str, context: dict[str, Any]) -> str | None:
    """The template's HTML; None when the sandbox refuses it; OverBudget past its budget."""
    job = json.dumps({"template": template, "context": context, "limit": OUTPUT_LIMIT})
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        __name__,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(SECONDS):
            html, _ = await child.communicate(job.encode())
    except TimeoutError:
        child.kill()
        await child.wait()
        raise OverBudget(f"the agent's email template ran past {SECONDS:g} s") from None
    if child.returncode == TOO_LONG:
        raise OverBudget(f"the agent's email template wrote over {OUTPUT_LIMIT} characters")
    return html.decode() if child.returncode == 0 else None


def _main() -> int:
    job = json.load(sys.stdin)
    written: list[str] = []
    size = 0
    try:
        compiled = SandboxedEnvironment(autoescape=True).from_string(job["template"])
        for chunk in compiled.generate(job["context"]):
            size += len(chunk)
            if size > job["limit"]:
                return TOO_LONG
            written.append(chunk)
    except jinja2.TemplateError:
        return REFUSED
    sys.stdout.write("".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
