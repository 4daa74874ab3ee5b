"""A throwaway PostgreSQL cluster, for tests and benchmarks (no pytest needed).

The binaries are found on PATH or under ``pg_config --bindir`` (or the Debian layout),
and one cluster is made in a temporary directory with ``initdb`` and started with
``pg_ctl`` on a Unix socket, ``fsync=off``. initdb refuses to run as root, so as root the
cluster belongs to the unprivileged ``postgres`` user (``runuser``), in a directory it
owns. Where that is impossible, ``PostgresUnavailableError`` says why.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "PostgresUnavailableError",
    "drop_schema",
    "find_bindir",
    "restart_cluster",
    "throwaway_cluster",
    "with_fresh_schema",
]


class PostgresUnavailableError(RuntimeError):
    """No cluster can be started here; the message says why."""


def find_bindir() -> str | None:
    """The directory of the PostgreSQL server binaries, or None."""
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(os.path.realpath(initdb))
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and os.path.isfile(os.path.join(out.stdout.strip(), "initdb")):
            return out.stdout.strip()
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def _prefix() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    """Start a cluster, yield its base URL, stop and remove it."""
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailableError(
            "no PostgreSQL binaries (initdb) on PATH or under pg_config --bindir"
        )
    as_root = os.geteuid() == 0
    if as_root and shutil.which("runuser") is None:
        raise PostgresUnavailableError(
            "running as root, and runuser is missing to run initdb as postgres"
        )
    prefix = _prefix()
    root = tempfile.mkdtemp(prefix="prism-pg-")
    try:
        if as_root:
            shutil.chown(root, user="postgres")
        os.chmod(root, 0o700)
        data = os.path.join(root, "data")
        run = [*prefix, os.path.join(bindir, "initdb"), "-D", data, "-A", "trust"]
        settings = f"-c fsync=off -c listen_addresses='' -k {root} -p 5432"
        start = [*prefix, os.path.join(bindir, "pg_ctl"), "-D", data, "-o", settings]
        try:
            subprocess.run([*run, "-U", "postgres", "--no-sync"], check=True, capture_output=True)
            subprocess.run(
                [*start, "-l", os.path.join(root, "log"), "-w", "start"],
                check=True,
                capture_output=True,
            )
        except subprocess.CalledProcessError as exc:
            raise PostgresUnavailableError(
                f"could not start a PostgreSQL cluster: {exc.stderr!r}"
            ) from exc
        try:
            yield f"postgresql://postgres@/postgres?host={root}&port=5432"
        finally:
            stop = [*prefix, os.path.join(bindir, "pg_ctl"), "-D", data, "-m", "immediate"]
            subprocess.run([*stop, "stop"], capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def with_fresh_schema(base_url: str, name: str | None = None) -> str:
    """The base URL with a new ``schema`` option (``name``, default a random unused one)."""
    parts = urlsplit(base_url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in {"schema", "search_path"}]
    query.append(("schema", name or f"t_{uuid.uuid4().hex[:16]}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def drop_schema(url: str) -> None:
    """Remove the schema a URL names (its ``schema`` option)."""
    import psycopg
    from psycopg import sql

    from ..stores.postgres import split_postgres_url

    conninfo, schema, _ = split_postgres_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def restart_cluster(url: str) -> None:
    """Restart the throwaway cluster serving ``url`` (its socket directory holds its data)."""
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailableError("no PostgreSQL binaries to restart the cluster with")
    root = dict(parse_qsl(urlsplit(url).query))["host"]
    data = os.path.join(root, "data")
    command = [*_prefix(), os.path.join(bindir, "pg_ctl"), "-D", data]
    command += ["-l", os.path.join(root, "log"), "-m", "fast", "-w", "restart"]
    subprocess.run(command, check=True, capture_output=True)
