"""A URL's password never leaves the process (issue 28 item 6): not in the demo's hints,
not in a usage error that quotes the command line, not in a driver's message that quotes
a malformed password, not in a line a logger writes to stderr."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from support.cli import failed, ok, run_cli

from prism_om.cli.redaction import RedactingStream, log_redactor
from prism_om.core.redaction import hide_url_password, hide_url_passwords, url_passwords

PASSWORD = "Pw7sEcReT"


def with_password(url: str, password: str = PASSWORD) -> str:
    parts = urlsplit(url)
    user = parts.username or "postgres"
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.netloc.split('@')[-1]}"))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgres://u:p@ss@h:5/db?schema=a", "postgres://u:***@h:5/db?schema=a"),
        ("postgresql://u:pa ss@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql://u@h/db?password=x&sslmode=require&Pass%77ord=y&sslpassword=z",
            "postgresql://u@h/db?password=***&sslmode=require&Pass%77ord=***&sslpassword=***",
        ),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://h:5432/db", "postgresql://h:5432/db"),  # a port, not a password
        ("sqlite:/tmp/u:pw@x.db", "sqlite:/tmp/u:pw@x.db"),  # a path, not a URL with a host
    ],
)
def test_the_one_rule_hides_a_password_wherever_a_url_carries_it(url: str, shown: str) -> None:
    assert hide_url_password(url) == shown
    if " " not in url:  # in a text, a URL ends at a space
        assert hide_url_passwords(f"at {url} now") == f"at {shown} now"


def test_the_rule_finds_every_url_and_keyword_in_a_text() -> None:
    text = "from 'postgresql://a:one@h/x' to postgres://b:two@h/y; conninfo password=three x"
    hidden = hide_url_passwords(text)
    assert not any(word in hidden for word in ("one", "two", "three"))
    assert url_passwords("postgresql://u:p%40ss@h/db?password=q") == ("p%40ss", "p@ss", "q")


def test_every_stderr_line_hides_url_passwords_with_no_secret_given() -> None:
    out = io.StringIO()
    stream = RedactingStream(out, log_redactor([]))  # type: ignore[arg-type]
    stream.write(f"WARNING waiting for postgresql://u:{PASSWORD}@db/x: refused\n")
    stream.flush()
    assert PASSWORD not in out.getvalue() and "u:***@db" in out.getvalue()


@pytest.mark.parametrize(
    "args",
    [
        ["schema", "--db", f"postgresql://u:{PASSWORD}@h/db"],
        ["schema", f"--db=postgresql://u:{PASSWORD}@h/db"],
        ["schema", "--db", f"postgresql://u:{PASSWORD} with spaces@h/db"],
        ["sessions", "--db", f"postgresql://u:{PASSWORD}@h/db", "--bogus"],
        ["demo", "--db", f"postgresql://u:{PASSWORD}@h/db", "--bogus"],
    ],
)
def test_a_usage_error_does_not_echo_a_password(args: list[str], tmp_path: Path) -> None:
    line = failed(run_cli(*args, cwd=tmp_path), 2)
    assert PASSWORD not in line and "with spaces" not in line


def test_a_drivers_message_quoting_the_password_is_redacted(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    # libpq rejects the percent-encoding before connecting, quoting the password whole.
    url = f"postgresql://u:{PASSWORD}%zz@127.0.0.1:1/db"
    line = failed(run_cli("sessions", "--db", url, cwd=tmp_path), 1)
    assert "percent-encoded" in line and PASSWORD not in line


def test_a_mistyped_scheme_does_not_echo_the_password(tmp_path: Path) -> None:
    line = failed(run_cli("sessions", "--db", f"postgresq://u:{PASSWORD}@h/db", cwd=tmp_path), 2)
    assert "unknown store URL" in line and PASSWORD not in line


def test_the_demo_on_a_server_never_prints_the_password(postgres_url: str) -> None:
    url = with_password(postgres_url)
    done = subprocess.run(
        [sys.executable, "-m", "prism_om.cli", "demo", "--db", url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = ok(done)
    assert PASSWORD not in out + done.stderr
    hints = out.split("Next:", 1)[1]
    assert hints.count(":***@") == 4 and "password is shown as ***" in hints
