"""The `gateway` command (and `python -m gateway`)."""

from __future__ import annotations

import sys


def main() -> None:
    # A Claude Code hook runs on every tool use: it starts without the server's imports.
    if sys.argv[1:3] == ["hook", "claude-code"]:
        from gateway import claude_hook

        sys.exit(claude_hook.main(sys.argv[3:]))
    from gateway.cli import main as cli_main

    cli_main()
