"""``prism-om inspect``: serve the read-only inspect page (see ``prism_om.inspect``).

On 127.0.0.1 unless ``--host`` names another address; one that is not loopback (not
127.0.0.0/8, ``::1`` or ``localhost``) is said on stderr as a warning: the page shows
whole transcripts. The store is opened read-only. The port is bound before anything is
announced, so a taken port is one error line and exit code 1. After the announcement,
stderr is written by a thread of its own (``stderr_lane``): a launcher that stops reading
it once the page is announced cannot make the page stop answering.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import Final

from ..core.limits import MAX_SAFE_INTEGER
from .common import count_argument, open_cli_store
from .listen import bind_listener
from .redaction import cli_redactor
from .stderr_lane import nonblocking_stderr

__all__ = ["DEFAULT_INSPECT_PORT", "add_inspect_arguments", "cmd_inspect"]

DEFAULT_INSPECT_PORT: Final = 8787
LOOPBACK: Final = "127.0.0.1"


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=count_argument(1, 65535),
        default=DEFAULT_INSPECT_PORT,
        metavar="N",
        help=f"port to serve on (default: {DEFAULT_INSPECT_PORT}; a port in use: exit code 1)",
    )
    parser.add_argument(
        "--host",
        default=None,
        metavar="ADDRESS",
        help=f"address to serve on (default: {LOOPBACK}; any other is served with a warning: "
        "whoever reaches it reads the transcripts)",
    )
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    parser.add_argument(
        "--recent-messages",
        type=count_argument(0, MAX_SAFE_INTEGER),
        default=8,
        metavar="N",
        help="context.recent_messages the agent uses (default: 8)",
    )


async def cmd_inspect(args: argparse.Namespace) -> None:
    from ..inspect import create_inspect_app  # ImportError naming the extra when missing
    from .tombstones import cli_invalidated_ids

    host = args.host or LOOPBACK
    async with open_cli_store(args.db) as store:
        await cli_invalidated_ids(store, args)  # warns about a mistyped --tombstone-scope now
        app = create_inspect_app(
            store,
            port=args.port,
            host=host,
            secrets=cli_redactor(args),
            tombstone_scopes=args.tombstone_scopes,
            recent_messages=args.recent_messages,
        )
        import uvicorn

        listener = bind_listener(host, args.port, serving="the inspect page", option="--port")
        with listener:
            if not is_loopback(host):
                sys.stderr.write(
                    f"prism-om: warning: serving on {host}, not {LOOPBACK}: anyone who can "
                    "reach this address can read the store's transcripts and memory\n"
                )
            shown = f"[{host}]" if ":" in host else host
            url = f"http://{shown}:{args.port}/"
            sys.stderr.write(f"prism-om: inspect page at {url} (read-only; Ctrl-C stops)\n")
            sys.stderr.flush()
            if args.open:
                import webbrowser

                webbrowser.open(url)
            # From here on a log line never waits for stderr to be read (stderr_lane).
            with nonblocking_stderr():
                config = uvicorn.Config(app, log_level="warning")
                await uvicorn.Server(config).serve(sockets=[listener])


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ``::1``) or ``localhost``."""
    if host.casefold() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: whoever it resolves for may reach it
