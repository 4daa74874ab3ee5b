"""``prism-om schema``: ``schema.sql`` as is, or transpiled to another SQL dialect."""

from __future__ import annotations

import argparse
from typing import Any

from ..stores._schema import SCHEMA_VERSION, load_schema
from .common import CliUsageError
from .output import print_json

__all__ = ["cmd_schema", "schema_sql"]


def schema_sql(dialect: str) -> list[str]:
    """The schema's statements in ``dialect`` (``sqlite``: as written in schema.sql)."""
    import sqlglot
    from sqlglot.dialects.dialect import Dialect

    schema = load_schema()
    name = dialect.lower()
    if name == "sqlite":
        return list(schema.statements)
    try:
        Dialect.get_or_raise(name)
    except ValueError:
        known = ", ".join(sorted(d for d in Dialect.classes if d))
        raise CliUsageError(f"unknown SQL dialect {dialect!r}; sqlglot knows: {known}") from None
    try:
        return [
            sqlglot.parse_one(statement, read="sqlite")
            .transform(_sqlite_storage_dropped)
            .sql(dialect=name, unsupported_level=sqlglot.ErrorLevel.RAISE)
            for statement in schema.statements
        ]
    except sqlglot.errors.SqlglotError as exc:
        raise CliUsageError(f"schema.sql does not transpile to {dialect}: {exc}") from None


def _sqlite_storage_dropped(node: Any) -> Any:
    """``WITHOUT ROWID`` left out: SQLite's storage layout, which other engines lack (a
    table there keeps its key as an index whatever the clause says)."""
    from sqlglot import exp

    return None if isinstance(node, exp.WithoutRowidProperty) else node


async def cmd_schema(args: argparse.Namespace) -> None:
    statements = schema_sql(args.dialect)
    if args.json:
        print_json(
            {"dialect": args.dialect.lower(), "version": SCHEMA_VERSION, "statements": statements}
        )
        return
    if args.dialect.lower() == "sqlite":
        print(load_schema().text, end="")
        return
    print(f"-- prism_om schema version {SCHEMA_VERSION}, transpiled from SQLite to {args.dialect}")
    print("-- by sqlglot; schema.sql is the source of truth.\n")
    print(";\n\n".join(statements) + ";")
