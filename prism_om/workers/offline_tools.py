"""Tool calls and results as notes: one line of what was done and one of what came of it.

A call names its tool and key argument, verbatim: the command (``called bash: `git add
.```), the path (``called read on src/app.py``) or the query (``called grep for "TODO"``).
A result says what came of it, never copying its body:

* an error (a ``[tool error]`` result, a non-zero exit, a traceback, an ``Error:`` line):
  its type and message and where it was raised, with the exit status;
* a successful read of a file (the call was a read): ``read N lines of PATH``, even when
  the file's text holds the word "error";
* a test run: its counts;
* a listing (most lines paths): the count of paths and of each kind (``812 under
  .git/objects``, ``40 .py``);
* a diff: the files and the lines added and removed;
* anything else: its line count and first line, each run of identical lines once with
  its count.

Results are tool output, never a user's statement: the pi importer writes a shell command
the user ran as a user message (``$ cmd``, the output, ``(exit code N)``), which is
summarised here like any tool result.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Final

__all__ = ["ToolCallNote", "is_shell_run", "summarize_tool_call", "summarize_tool_result"]

_COMMAND_KEYS: Final = ("command", "cmd", "script")
_PATH_KEYS: Final = ("path", "file", "file_path", "filename", "filePath", "url")
_QUERY_KEYS: Final = ("query", "pattern", "q", "regex", "search")
_OTHER_KEYS: Final = ("name", "id", "branch", "team")
_READ_TOOLS: Final = frozenset("read read_file cat view open open_file readfile".split())
_MAX_ARG: Final = 160
_MAX_LINE: Final = 120
_EXCEPTION = re.compile(
    r"^\s*(?:[\w.]+\.)?(?P<cls>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Warning)|"
    r"AssertionError|KeyboardInterrupt|StopIteration)(?::\s*(?P<message>.*))?$"
)
_ERROR_WORD = re.compile(
    r"^\s*(?P<cls>error|fatal|panic|ERROR|FATAL|Error)(?:\[\w+\])?:\s*(?P<message>.+)$"
)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_WHERE = re.compile(r"(?P<file>[\w./~-]+\.\w+):(?P<line>\d+)(?::\d+)?")
_EXIT = re.compile(
    r"\((?:exit code|exit status) (?P<code>-?\d+)\)|\b(?:exit(?:ed)?(?: with)? (?:code|status)"
    r"|Exit code:?|exit code:?|returncode=?) ?(?P<code2>-?\d+)\b",
    re.I,
)
_TEST_SUMMARY = re.compile(r"\b(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b")
# A path: no spaces, a slash or a dot, and a letter ("3.14" and "832040" are numbers).
_PATHLIKE = re.compile(r"^(?=.*[/.])(?=.*[A-Za-z])[\w./~@+-]+$")
_MARKER = "[tool error]"


class ToolCallNote:
    """A tool call the results that follow answer: its tool and arguments."""

    __slots__ = ("arguments", "name")

    def __init__(self, name: str, arguments: Any) -> None:
        self.name = name
        self.arguments = arguments if isinstance(arguments, dict) else {}

    def value(self, keys: tuple[str, ...]) -> str:
        for key in keys:
            value = self.arguments.get(key)
            if isinstance(value, str | int | float) and str(value).strip():
                return str(value)
        return ""

    @property
    def path(self) -> str:
        return self.value(_PATH_KEYS)

    @property
    def is_read(self) -> bool:
        return self.name.lower() in _READ_TOOLS and bool(self.path)


def _short(text: str, limit: int = _MAX_ARG) -> str:
    first, *rest = text.strip().split("\n")
    first = first.rstrip()
    if len(first) > limit:
        return first[: limit - 1].rstrip() + "…"
    return first + (" …" if rest else "")


def summarize_tool_call(name: str, arguments: Any) -> str:
    """``called <tool>`` and its key argument, verbatim."""
    call = ToolCallNote(name, arguments)
    command = call.value(_COMMAND_KEYS)
    if command:
        return f"called {name}: `{_short(command)}`"
    query = call.value(_QUERY_KEYS)
    path = call.path
    if query:
        where = f" in {_short(path)}" if path else ""
        return f'called {name} for "{_short(query)}"{where}'
    target = path or call.value(_OTHER_KEYS)
    return f"called {name} on {_short(target)}" if target else f"called {name}"


def is_shell_run(text: str) -> bool:
    """Whether a user message is a shell command and its output (``$ cmd`` first)."""
    return text.startswith("$ ")


def summarize_tool_result(text: str, call: ToolCallNote | None = None) -> tuple[str, str]:
    """A tool result's outcome in one line, and its priority.

    Errors are high; a test run is medium (high when something failed); the rest low.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    marked = bool(lines) and lines[0].strip() == _MARKER
    if marked:
        lines = lines[1:]
    exit_code = _exit_code(lines)
    status = f"exit {exit_code}; " if exit_code is not None else ""
    if not lines:
        return (
            "Tool error" if marked else "Tool result"
        ) + ": (empty)", "high" if marked else "low"
    if lines[0].startswith("[… truncated"):
        return "Tool result: (truncated)", "low"
    failed = marked or (exit_code is not None and exit_code != 0)
    counts = _TEST_SUMMARY.findall(text)
    if counts and not marked:
        bad = any(kind.startswith(("failed", "error")) for _, kind in counts)
        summary = ", ".join(f"{n} {kind}" for n, kind in counts)
        return f"Tool result: {status}{summary}", "high" if bad else "medium"
    # A file read that succeeded says so, whatever the file holds ("error" in its code);
    # one that failed says so first (a traceback, "Error: no such file").
    opens_with_error = bool(
        lines[0].startswith("Traceback")
        or _EXCEPTION.match(lines[0])
        or _ERROR_WORD.match(lines[0])
    )
    if call is not None and call.is_read and not failed and not opens_with_error:
        return f"Tool result: read {len(text.splitlines())} lines of {_short(call.path)}", "low"
    error = _error(lines, text, strict=not failed)
    if error:
        return f"Tool error: {status}{error}", "high"
    if failed:
        return f"Tool error: {status}{_short(lines[-1], _MAX_LINE)}", "high"
    return f"Tool result: {status}{_body(lines)}", "low"


def _exit_code(lines: list[str]) -> int | None:
    for line in reversed(lines[-3:]):
        match = _EXIT.search(line)
        if match:
            return int(match["code"] or match["code2"])
    return None


def _error(lines: list[str], text: str, *, strict: bool) -> str:
    """The error's type, message and where: the last exception line of a traceback, else
    an ``error:`` line. With ``strict`` (nothing says the tool failed) only a traceback
    or a line that names an exception class counts."""
    traceback = "Traceback (most recent call last)" in text
    for line in reversed(lines):
        match = _EXCEPTION.match(line)
        if match is None and not (strict and not traceback):
            match = _ERROR_WORD.match(line)
        if match is None:
            continue
        if strict and not traceback and not match["message"]:
            continue  # a bare class name in output (a listing of errors.py) is no error
        message = _short(" ".join((match["message"] or "").split()), _MAX_LINE)
        detail = f"{match['cls']}: {message}" if message else match["cls"]
        return detail + _where(text)
    return ""


def _where(text: str) -> str:
    frames = _FRAME.findall(text)
    if frames:
        return f" at {frames[-1][0]} line {frames[-1][1]}"
    found = _WHERE.search(text)
    return f" at {found['file']} line {found['line']}" if found else ""


def _body(lines: list[str]) -> str:
    """What output that is no error says: a listing by count and kind, a diff by files and
    lines changed, else its first line and size, each repeated line once with its count."""
    if len(lines) >= 5:
        paths = [line.strip() for line in lines if _PATHLIKE.match(line.strip())]
        if len(paths) >= 0.8 * len(lines):
            return _listing(paths, len(lines))
    if any(line.startswith("diff --git") or line.startswith("+++ ") for line in lines):
        return _diff(lines)
    runs: list[tuple[str, int]] = []
    for line in lines:
        line = line.rstrip()
        if runs and runs[-1][0] == line:
            runs[-1] = (line, runs[-1][1] + 1)
        else:
            runs.append((line, 1))
    repeated = Counter(line for line in lines)
    top, times = repeated.most_common(1)[0]
    first = _short(" ".join(lines[0].split()), _MAX_LINE)
    if runs[0][1] > 1:
        first += f" ({runs[0][1]} times)"
    if len(lines) == 1:
        return first
    note = f"{first} (+{len(lines) - 1} lines)"
    if times > 2 and top != lines[0]:
        note += f"; `{_short(top.strip(), 80)}` {times} times"
    elif len(runs) == 1:
        note = first
    return note


def _listing(paths: list[str], total: int) -> str:
    kinds: Counter[str] = Counter()
    for path in paths:
        kinds[_kind(path)] += 1
    parts = [f"{n} {kind}" for kind, n in kinds.most_common(4)]
    rest = len(paths) - sum(n for _, n in kinds.most_common(4))
    if rest:
        parts.append(f"{rest} other")
    return f"listed {total} paths ({', '.join(parts)})"


def _kind(path: str) -> str:
    bare = path.removeprefix("./")
    if bare.startswith(".git/objects") or "/.git/objects/" in bare:
        return "under .git/objects"
    if bare.startswith(".git/") or "/.git/" in bare or bare == ".git":
        return "under .git"
    for heavy in ("node_modules", "__pycache__", ".venv", "venv", "dist", "build"):
        if bare.startswith(heavy + "/") or f"/{heavy}/" in bare:
            return f"under {heavy}"
    name = bare.rstrip("/").rsplit("/", 1)[-1]
    if bare.endswith("/") or "." not in name.lstrip("."):
        return "directories or files without extension"
    return f".{name.rsplit('.', 1)[-1]} files"


def _diff(lines: list[str]) -> str:
    files: list[str] = []
    for line in lines:
        if line.startswith("+++ "):
            name = line[4:].strip().removeprefix("b/")
            if name != "/dev/null" and name not in files:
                files.append(name)
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return f"diff of {len(files)} files (+{added} -{removed} lines): {shown}"
