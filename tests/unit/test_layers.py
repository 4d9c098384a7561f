"""Dependencies point one way: the front doors (API, MCP, command line) -> the core -> the
seam. Channels are written against the seam alone; the core knows no channel and no platform
SDK (only the composition root wires them in); only `gateway.store` talks to the database."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSITION_ROOT = {"gateway/app.py", "gateway/cli/main.py"}
PLATFORM_SDKS = (
    *("slack_bolt", "slack_sdk", "discord", "aiosmtplib", "aioimaplib"),
    *("microsoft_agents", "aiogram", "telegram"),
)
DATABASE_LIBRARIES = ("sqlalchemy", "sqlmodel", "alembic", "psycopg", "asyncpg", "sqlite3")
# What a channel (and the seam itself) may import of the gateway: the seam, and the three
# modules of plain words under it.
SEAM = ("gateway.seam", "gateway.errors", "gateway.vocabulary", "gateway.lifecycle")
FRONT_DOORS = ("gateway.api", "gateway.mcp", "gateway.cli", "gateway.app", "gateway.entry")
# The parts of the gateway from the top down (README's module map): each imports only its own
# modules and the parts below it.
ORDER = (
    "__main__",
    "entry",
    "cli",
    "app",
    "mcp",
    "api",
    "doors",
    "runtime",
    "answers",
    "intake",
    "escalation",
    "outbox",
    "policies",
    "core",
    "routing",
    "conditions",
    "wire",
    "security",
    "store",
    "settings",
    "seam",
    "lifecycle",
    "vocabulary",
    "errors",
)


def imports(path: Path) -> set[str]:
    """The modules `path` imports (`from a import b` is `a.b` when that is a module)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names}
            found |= {name for name in submodules if _is_module(name)} or {node.module}
    return found


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def named(path: Path) -> str:
    return str(path.relative_to(ROOT))


def within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@pytest.mark.parametrize("path", modules("channels"), ids=named)
def test_a_channel_imports_only_the_seam_of_the_gateway(path: Path) -> None:
    outside = [m for m in imports(path) if within(m, ("gateway",)) and not within(m, SEAM)]
    assert outside == [], (named(path), outside)


@pytest.mark.parametrize("path", modules("gateway/seam"), ids=named)
def test_the_seam_imports_nothing_else_of_the_gateway(path: Path) -> None:
    outside = [m for m in imports(path) if within(m, ("gateway", "channels"))]
    assert [m for m in outside if not within(m, SEAM)] == [], named(path)


@pytest.mark.parametrize("path", [*modules("gateway"), *modules("channels")], ids=named)
def test_only_the_store_talks_to_the_database(path: Path) -> None:
    if named(path).startswith("gateway/store/"):
        return
    assert [m for m in imports(path) if within(m, DATABASE_LIBRARIES)] == [], named(path)


@pytest.mark.parametrize("path", modules("gateway"), ids=named)
def test_the_core_imports_no_channel_and_no_platform_sdk(path: Path) -> None:
    found = imports(path)
    assert [m for m in found if within(m, PLATFORM_SDKS)] == [], named(path)
    if named(path) not in COMPOSITION_ROOT:
        assert [m for m in found if within(m, ("channels",))] == [], named(path)


@pytest.mark.parametrize("path", modules("gateway"), ids=named)
def test_nothing_below_the_front_doors_imports_them(path: Path) -> None:
    module = named(path).removesuffix(".py").replace("/", ".")
    if within(module, FRONT_DOORS) or module == "gateway.__main__":
        return
    assert [m for m in imports(path) if within(m, FRONT_DOORS)] == [], named(path)


def part(module: str) -> str:
    """`gateway.policies.votes` -> `policies`; `gateway` itself -> its `__init__`."""
    return module.split(".")[1] if module.count(".") else "__init__"


def test_every_part_of_the_gateway_is_in_the_order() -> None:
    parts = {part(named(p).removesuffix(".py").replace("/", ".")) for p in modules("gateway")}
    assert parts - {"__init__"} == set(ORDER)


@pytest.mark.parametrize("path", modules("gateway"), ids=named)
def test_a_part_imports_only_the_parts_below_it(path: Path) -> None:
    own = part(named(path).removesuffix(".py").replace("/", "."))
    if own == "__init__":
        return
    above = set(ORDER[: ORDER.index(own)])
    upward = [m for m in imports(path) if within(m, ("gateway",)) and part(m) in above]
    assert upward == [], (named(path), upward)


@pytest.mark.parametrize("path", modules("client/hitl_client"), ids=named)
def test_the_client_never_imports_the_server(path: Path) -> None:
    """It is installed where agents run, without the gateway or its dependencies."""
    server = ("gateway", "channels", "fastapi", "sqlalchemy", "sqlmodel", *PLATFORM_SDKS)
    assert not {m for m in imports(path) if within(m, server)}
