"""A TCP port in front of a platform stand-in that refuses, hangs or lets traffic through.

The gateway is pointed at the door's port from the start; a test then decides what the
"platform" does: nothing listens (refused), a listener that accepts and never answers (hangs),
or a relay to the real stand-in (up), always on the same port, as when a service comes back.
"""

from __future__ import annotations

import asyncio
import contextlib

from tests.services.net import free_port


class Door:
    def __init__(self) -> None:
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._target: int | None = None
        self._held: set[asyncio.StreamWriter] = set()
        self._relays: set[asyncio.Task[None]] = set()

    def url(self, scheme: str, path: str = "") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    async def hang(self) -> None:
        """Accept connections and never answer them."""
        self._target = None
        await self._listen()

    async def open(self, target_port: int) -> None:
        """Relay every new connection to `target_port`; connections held so far are dropped,
        as a restarted service would."""
        self._target = target_port
        for writer in list(self._held):
            writer.close()
        await self._listen()

    async def close(self) -> None:
        for writer in list(self._held):
            writer.close()
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            if self._target is None:
                await self._hold(reader, writer)
            else:
                await self._relay(reader, writer, self._target)
        finally:
            self._relays.discard(task)
            writer.close()

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._held.add(writer)
        try:
            while await reader.read(65536):  # read and drop until the client gives up
                pass
        except ConnectionError:
            pass
        finally:
            self._held.discard(writer)

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: int
    ) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.write_eof()
