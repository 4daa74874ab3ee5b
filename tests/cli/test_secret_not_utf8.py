"""A secret that is not UTF-8 (``--secret`` or a ``PRISM_SECRETS`` line) is a usage error:
one ``prism-om: error:`` line naming where it came from, exit code 2, its value not shown.
It once crashed with a ``UnicodeEncodeError`` traceback while building the stderr
redactor, before any command ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from prism_om.cli.app import main
from prism_om.cli.redaction import SECRETS_ENV

# What a byte that is not UTF-8 on the command line or in the environment becomes.
NOT_UTF8 = b"\xffab".decode("utf-8", "surrogateescape")
# Every command that takes --secret (and so reads PRISM_SECRETS to redact what it prints).
COMMANDS = [
    ["search", "billing", "--session", "s1"],
    ["recall", "--session", "s1", "abcdefabcdef"],
    ["view", "--session", "s1"],
    ["status", "--session", "s1"],
    ["page", "--session", "s1"],
    ["sessions"],
    ["observe", "--session", "s1"],
    ["compact", "--session", "s1"],
    ["check"],
    ["inspect"],
    ["mcp"],
]


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors exit from inside parse_args
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _assert_one_usage_line(code: int, err: str, names: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("prism-om: error: ") and names in err, err
    # The value is not quoted, in any spelling: it is a secret, and nothing redacts it yet.
    assert all(form not in err for form in (NOT_UTF8, "\\udcff", "\\xff")), err


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_secret_option_that_is_not_utf8(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    argv = [*command, "--db", f"sqlite:{tmp_path / 'x.db'}", "--secret", NOT_UTF8]
    _assert_one_usage_line(*_run(capsys, argv), "argument --secret")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_secrets_variable_line_that_is_not_utf8(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: list[str],
) -> None:
    monkeypatch.setenv(SECRETS_ENV, f"fine-secret\n{NOT_UTF8}")
    argv = [*command, "--db", f"sqlite:{tmp_path / 'x.db'}"]
    _assert_one_usage_line(*_run(capsys, argv), f"{SECRETS_ENV} line 2")


@pytest.mark.parametrize("where", ["option", "environment"])
def test_the_real_bytes_from_a_shell(tmp_path: Path, where: str) -> None:
    # The bytes themselves, as a shell passes them ($'\xff'), through the console entry.
    argv = [b"search", b"billing", b"--db", os.fsencode(f"sqlite:{tmp_path / 'x.db'}")]
    argv += [b"--session", b"s1"]
    env = {k: v for k, v in os.environb.items() if k != os.fsencode(SECRETS_ENV)}
    if where == "option":
        argv += [b"--secret", b"\xff"]
    else:
        env[os.fsencode(SECRETS_ENV)] = b"\xffab"
    done = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"prism_om.cli", *argv],
        capture_output=True,
        env=env,
        timeout=120,
    )
    err = done.stderr.decode("utf-8", "backslashreplace")
    assert done.returncode == 2, err
    assert b"Traceback" not in done.stderr and len(err.strip().splitlines()) == 1, err
    named = "argument --secret" if where == "option" else f"{SECRETS_ENV} line 1"
    assert err.startswith("prism-om: error: ") and named in err, err
