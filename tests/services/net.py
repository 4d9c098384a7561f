"""Loopback helpers for test servers."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bound_socket() -> socket.socket:
    """A socket bound to a free port on 127.0.0.1, to hand to a server (`port_of`): a port
    only looked up could be taken before the server binds it (by another test worker)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])
