"""A throwaway PostgreSQL cluster for the test session, or the server a variable names.

``PRISM_TEST_POSTGRES_URL`` (a ``postgresql://`` URL) is used when set. Otherwise the
binaries are found on PATH or under ``pg_config --bindir`` (or the Debian layout), and
one cluster is made in a temporary directory with ``initdb`` and started with ``pg_ctl``
on a Unix socket, ``fsync=off``. initdb refuses to run as root, so as root the cluster
belongs to the unprivileged ``postgres`` user (``runuser``), in a directory it owns.
Where neither is possible the PostgreSQL tests skip with the reason, unless
``PRISM_REQUIRE_POSTGRES=1`` (``.ci/run`` sets it), which turns the skip into a failure.
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

import pytest

URL_VARIABLE = "PRISM_TEST_POSTGRES_URL"
REQUIRE_VARIABLE = "PRISM_REQUIRE_POSTGRES"


def unavailable(reason: str) -> None:
    """Skip the test, or fail it where CI requires PostgreSQL."""
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but PostgreSQL tests cannot run: {reason}")
    pytest.skip(reason)


def find_bindir() -> str | None:
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


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    """Start a cluster, yield its base URL, stop and remove it."""
    bindir = find_bindir()
    if bindir is None:
        unavailable("no PostgreSQL binaries (initdb) on PATH or under pg_config --bindir")
        raise AssertionError("unreachable")
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    if as_root:
        if shutil.which("runuser") is None:
            unavailable("running as root, and runuser is missing to run initdb as postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    root = tempfile.mkdtemp(prefix="prism-pg-")
    try:
        if as_root:
            shutil.chown(root, user="postgres")
        os.chmod(root, 0o700)
        data = os.path.join(root, "data")
        run = [*prefix, os.path.join(bindir, "initdb"), "-D", data, "-A", "trust"]
        subprocess.run([*run, "-U", "postgres", "--no-sync"], check=True, capture_output=True)
        settings = f"-c fsync=off -c listen_addresses='' -k {root} -p 5432"
        start = [*prefix, os.path.join(bindir, "pg_ctl"), "-D", data, "-o", settings]
        subprocess.run(
            [*start, "-l", os.path.join(root, "log"), "-w", "start"],
            check=True,
            capture_output=True,
        )
        try:
            yield f"postgresql://postgres@/postgres?host={root}&port=5432"
        finally:
            stop = [*prefix, os.path.join(bindir, "pg_ctl"), "-D", data, "-m", "immediate"]
            subprocess.run([*stop, "stop"], capture_output=True)
    except subprocess.CalledProcessError as exc:
        unavailable(f"could not start a PostgreSQL cluster: {exc.stderr!r}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def with_fresh_schema(base_url: str) -> str:
    """The base URL with a new, unused ``schema`` option: one per test."""
    parts = urlsplit(base_url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in {"schema", "search_path"}]
    query.append(("schema", f"t_{uuid.uuid4().hex[:16]}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def drop_schema(url: str) -> None:
    """Remove the schema a test URL names (its ``schema`` option)."""
    import psycopg
    from psycopg import sql

    from prism_om.stores.postgres import split_postgres_url

    conninfo, schema, _ = split_postgres_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def restart_cluster(url: str) -> None:
    """Restart the throwaway cluster serving ``url`` (its socket directory holds its data)."""
    bindir = find_bindir()
    assert bindir is not None
    root = dict(parse_qsl(urlsplit(url).query))["host"]
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    pg_ctl = os.path.join(bindir, "pg_ctl")
    data = os.path.join(root, "data")
    subprocess.run(
        [
            *prefix,
            pg_ctl,
            "-D",
            data,
            "-l",
            os.path.join(root, "log"),
            "-m",
            "fast",
            "-w",
            "restart",
        ],
        check=True,
        capture_output=True,
    )
