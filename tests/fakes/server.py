"""What every fake platform shares: an aiohttp server on 127.0.0.1, on a port the OS picks,
started and stopped around a test (`async with FakeSlack() as fake:`), whose websockets are
closed before it stops (aiohttp would otherwise wait for them)."""

from __future__ import annotations

from typing import Self

from aiohttp import WSCloseCode, web


class FakeServer:
    def __init__(self) -> None:
        self._sockets: list[web.WebSocketResponse] = []  # the connected clients, oldest first
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    def add_routes(self, app: web.Application) -> None:
        """The platform's endpoints."""
        raise NotImplementedError

    def release(self) -> None:
        """Let go of whatever the fake holds back on purpose, as it stops."""

    async def start(self) -> Self:
        app = web.Application()
        self.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        # Port 0: the OS picks a free port, with no race between choosing and binding it.
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        self.release()
        for socket in list(self._sockets):
            await socket.close(code=WSCloseCode.GOING_AWAY, message=b"server stopping")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._port
