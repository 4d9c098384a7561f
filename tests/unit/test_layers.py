"""Dependencies point one way: the core knows no channel and no platform SDK (only the
composition root wires them); channels reach the store only through the core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSITION_ROOT = {"gateway/app.py", "gateway/cli/main.py"}
PLATFORM_SDKS = ("slack_bolt", "slack_sdk", "discord", "aiosmtplib", "aioimaplib")
# Plain values the store defines (read-only rows, timestamp helpers) may be imported anywhere.
STORE_VALUES = ("gateway.store.rows", "gateway.store.values")


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", modules("gateway"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_no_channel_and_no_platform_sdk(path: Path) -> None:
    name = str(path.relative_to(ROOT))
    found = imports(path)
    assert not [m for m in found if m.split(".")[0] in PLATFORM_SDKS], name
    if name not in COMPOSITION_ROOT:
        assert not [m for m in found if m.split(".")[0] == "channels"], name


@pytest.mark.parametrize("path", modules("channels"), ids=lambda p: str(p.relative_to(ROOT)))
def test_channels_reach_the_store_only_through_the_core(path: Path) -> None:
    touching = [
        m for m in imports(path) if m.startswith("gateway.store") and not m.startswith(STORE_VALUES)
    ]
    assert touching == [], (str(path.relative_to(ROOT)), touching)
