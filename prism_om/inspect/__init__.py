"""``prism-om inspect``: a local read-only page over a store's sessions, memory and branches.

Needs the ``inspect`` extra: ``pip install 'prism-om[inspect]'``.
"""

from __future__ import annotations

from .._extras import install_hint

try:
    from .app import DEFAULT_PORT, create_inspect_app
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    if exc.name is None or not exc.name.startswith(
        ("starlette", "jinja2", "markupsafe", "mcp", "uvicorn")
    ):
        raise
    raise ImportError(f"prism-om inspect needs its web stack: {install_hint('inspect')}") from exc

__all__ = ["DEFAULT_PORT", "create_inspect_app"]
