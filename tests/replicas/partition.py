"""A TCP relay on 127.0.0.1 whose traffic can be cut without closing anything: after
`cut()`, bytes stop flowing both ways and no FIN or RST is sent, as when a network link
goes away; new connections are accepted and never answered."""

from __future__ import annotations

import asyncio
import contextlib

from tests.services.net import free_port


class Partition:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.port = free_port()
        self._target = (target_host, target_port)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._closing = False

    async def start(self) -> Partition:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    def cut(self) -> None:
        self._flowing.clear()

    async def close(self) -> None:
        """Close every connection (the relays then end by themselves), then the port."""
        self._closing = True
        self._flowing.set()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            await self._flowing.wait()  # a connection opened during the cut hangs
            if not self._closing:
                await self._relay(reader, writer)
        except OSError:
            pass  # the target refused, or a side reset: the connection just ends
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers.add(up_writer)
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                await self._flowing.wait()  # cut: hold what arrived, forever
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()
