"""The DNS-rebinding check of a server on a loopback port (``mcp --http``, ``inspect``).

A web page in the user's browser that rebinds its own domain name to 127.0.0.1 still sends
its own name as ``Host`` (and its origin as ``Origin``): allowing only this server's own
address and port refuses it, so it cannot read the memory through the browser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings

__all__ = ["HTTP_HOST", "http_security"]

HTTP_HOST = "127.0.0.1"


def http_security(port: int, host: str = HTTP_HOST) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding check, allowing only this server's own address
    (``host``, default 127.0.0.1, or ``localhost``, on ``port``)."""
    from mcp.server.transport_security import TransportSecuritySettings

    named = f"[{host}]" if ":" in host else host  # an IPv6 address takes brackets
    hosts = list(dict.fromkeys([f"{named}:{port}", f"localhost:{port}"]))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{host}" for host in hosts],
    )
