"""The MCP server (``prism-om mcp``); needs the ``mcp`` extra: ``pip install 'prism-om[mcp]'``."""

from __future__ import annotations

from .._extras import install_hint

try:
    from .server import create_mcp_server
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    if exc.name is None or not exc.name.startswith(("mcp", "starlette", "uvicorn")):
        raise
    raise ImportError(f"the prism-om MCP server needs the mcp SDK: {install_hint('mcp')}") from exc

__all__ = ["create_mcp_server"]
