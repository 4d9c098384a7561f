"""The `gateway` command (and `python -m gateway`)."""

from __future__ import annotations

import gc
import sys


def main() -> None:
    # A Claude Code hook runs on every tool use: it starts without the server's imports.
    if sys.argv[1:3] == ["hook", "claude-code"]:
        from gateway.cli import claude_hook

        sys.exit(claude_hook.main(sys.argv[3:]))
    # Start-up makes a few hundred thousand objects that live as long as the process (modules,
    # classes, schemas): collecting while they are made would walk them over and over, a
    # fifth of the server's start. `gateway.cli.main` turns collection back on, or for
    # `serve`, `gateway.app.running` once start-up is done.
    gc.disable()
    # httpx imports its own command-line client (click, rich, pygments: ~80 ms) whenever those
    # are installed, and the CEL binding's CLI installs them. The gateway never runs it.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    from gateway.cli.main import main as cli_main

    cli_main()
