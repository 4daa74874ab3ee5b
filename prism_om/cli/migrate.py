"""``prism-om migrate``: bring a store of an older schema version to this prism_om's.

The read commands open a store read-only, and a read-only open never migrates (it refuses
an older file with ``StoreVersionError``, whose message names this command). Migrating is
what a writable open does anyway: in place, in one transaction per version step, from the
store's own rows; this command makes that open on purpose and says what it did. It adds
and rewrites derived rows only: no entry, leaf or session is removed or changed. An older
prism_om cannot open the migrated store (it refuses a newer version), so ``--backup``
keeps a copy of a SQLite file as it was.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
from pathlib import Path

from ..errors import StoreError, StoreVersionError
from ..stores import parse_store_url
from ..stores._schema import SCHEMA_VERSION
from .common import CliUsageError, open_cli_store, store_url
from .output import print_json

__all__ = ["cmd_migrate"]


async def _version_before(db: str) -> tuple[int, str]:
    """The store's schema version, read by a read-only open (which changes nothing), and
    its URL as the store shows it (a server's password hidden)."""
    try:
        async with open_cli_store(db) as store:
            return SCHEMA_VERSION, store.url
    except StoreVersionError as exc:
        if exc.version > exc.supported:
            raise  # newer than this prism_om: nothing here can read it, let alone migrate
        return exc.version, exc.url or store_url(db)


async def _backup(scheme: str, url: str, path: str, backup: str) -> None:
    """A consistent copy of the SQLite file at ``backup`` (SQLite's backup API, so writes
    still in the WAL are in it and a writer meanwhile cannot tear it); ``url`` is the
    store's as shown (a server's password hidden). An existing ``backup`` is refused."""
    if scheme != "sqlite":
        raise CliUsageError(
            f"--backup copies a SQLite file; {url} is a {scheme} store: back it up with its "
            "own tools (pg_dump, a copy of the directory) first",
            url=url,
        )
    try:
        await asyncio.to_thread(_copy_sqlite, path, backup)
    except FileExistsError:
        raise CliUsageError(
            f"--backup {backup!r} exists already; name a new file", url=url
        ) from None
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"--backup {backup!r}: cannot copy {url} there: {exc}", url=url) from exc


def _copy_sqlite(path: str, backup: str) -> None:
    # O_EXCL: the check and the creation are one step, so no file is ever overwritten.
    os.close(os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        source = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
        try:
            target = sqlite3.connect(backup)
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            source.close()
    except BaseException:
        os.unlink(backup)  # the file this call made, half written: nothing of the user's
        raise


async def cmd_migrate(args: argparse.Namespace) -> None:
    url = store_url(args.db)
    scheme, path = parse_store_url(url)
    if scheme == "memory":
        raise CliUsageError(
            f"--db {args.db!r} is an in-memory store: it has no stored schema to migrate",
            url=url,
        )
    before, shown = await _version_before(args.db)
    migrated = before < SCHEMA_VERSION
    if migrated:
        if args.backup:
            await _backup(scheme, shown, path, args.backup)
        async with open_cli_store(args.db, write=True):
            pass  # the writable open migrated it, step by step, each step one transaction
    if args.json:
        print_json(
            {
                "url": shown,
                "from": before,
                "to": SCHEMA_VERSION,
                "migrated": migrated,
                "backup": args.backup if migrated and args.backup else None,
            }
        )
        return
    if not migrated:
        print(f"{shown} is at schema version {SCHEMA_VERSION} already: nothing to migrate")
        return
    kept = f"; the file as it was is in {args.backup}" if args.backup else ""
    print(f"{shown}: migrated from schema version {before} to {SCHEMA_VERSION}{kept}")
