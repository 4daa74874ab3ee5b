"""``prism-om mcp``: serve a store's memory to MCP clients (see ``prism_om.mcp``).

stdio by default, the transport desktop clients start a server with. ``--http PORT``
serves streamable HTTP on 127.0.0.1 only, and checks every request's ``Host`` and
``Origin`` against that address and port: a web page in the user's browser that rebinds
its own domain name to 127.0.0.1 still sends its own name as ``Host`` (and its origin as
``Origin``), and is refused, so it cannot read the memory through the browser. The port
is bound before anything is announced: a port another program holds is one
``prism-om: error:`` line and exit code 1, with no "MCP over HTTP at" line first.
"""

from __future__ import annotations

import argparse
import sys

from ..core.limits import MAX_SAFE_INTEGER
from ..reports.http_security import HTTP_HOST, http_security
from .common import count_argument, open_cli_store
from .listen import bind_listener
from .redaction import cli_redactor

__all__ = ["add_mcp_arguments", "cmd_mcp"]


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http",
        type=count_argument(1, 65535),
        metavar="PORT",
        help=f"serve streamable HTTP on {HTTP_HOST}:PORT/mcp instead of stdio (a port "
        "in use: exit code 1)",
    )
    parser.add_argument(
        "--allow-write",
        action="store_true",
        help="add the append_message and observe tools (default: read-only)",
    )
    parser.add_argument(
        "--recent-messages",
        type=count_argument(0, MAX_SAFE_INTEGER),
        default=8,
        metavar="N",
        help="context.recent_messages the agent uses (default: 8)",
    )


async def cmd_mcp(args: argparse.Namespace) -> None:
    from ..mcp import create_mcp_server  # ImportError naming the extra when it is missing
    from .tombstones import cli_invalidated_ids

    async with open_cli_store(args.db, write=args.allow_write) as store:
        await cli_invalidated_ids(store, args)  # warns about a mistyped --tombstone-scope now
        server = create_mcp_server(
            store,
            secrets=cli_redactor(args),
            allow_write=args.allow_write,
            tombstone_scopes=args.tombstone_scopes,
            recent_messages=args.recent_messages,
        )
        if args.http is None:
            await server.run_stdio_async()
            return
        import uvicorn

        app = server.streamable_http_app(
            transport_security=http_security(args.http),
            host=HTTP_HOST,
        )
        config = uvicorn.Config(app, host=HTTP_HOST, port=args.http, log_level="warning")
        listener = bind_listener(
            HTTP_HOST, args.http, serving="MCP over HTTP", option="--http PORT"
        )
        with listener:
            sys.stderr.write(f"prism-om: MCP over HTTP at http://{HTTP_HOST}:{args.http}/mcp\n")
            sys.stderr.flush()
            await uvicorn.Server(config).serve(sockets=[listener])
