"""The listening socket of a local HTTP server (``inspect``, ``mcp --http``), bound before
anything is announced, so a taken port is one clear error rather than a traceback."""

from __future__ import annotations

import socket

from ..errors import PrismMemoryError

__all__ = ["bind_listener"]


def bind_listener(host: str, port: int, *, serving: str, option: str) -> socket.socket:
    """A socket listening on ``host:port``; ``serving`` and ``option`` word the error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise PrismMemoryError(
            f"cannot serve {serving} on {host}:{port}: {exc.strerror or exc} "
            f"(another program holds the port? choose another {option})"
        ) from None
    return listener
