"""The in-process test gateway survives its port being taken before uvicorn binds it (another
test worker got it first): it starts on another, instead of uvicorn's exit stopping the
test's event loop and every later test on that worker."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from tests.services import inprocess
from tests.services.net import free_port


async def test_a_taken_port_is_left_for_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        second = free_port()
        ports = iter([int(taken.getsockname()[1]), second])
        monkeypatch.setattr(inprocess, "free_port", lambda: next(ports))
        settings = inprocess.test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db")
        async with inprocess.running_gateway(settings) as gateway:
            assert gateway.base_url == f"http://127.0.0.1:{second}"
            async with httpx.AsyncClient(base_url=gateway.base_url) as client:
                assert (await client.get("/healthz")).status_code == 200
