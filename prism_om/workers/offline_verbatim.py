"""Text the offline observer must keep exactly as written: code, commands, paths, captions.

The observer rewrites prose (drops articles, capitalises a sentence's first word, turns
sentence ends into ``;``), which mangles anything that is not prose: ``git add .`` would
become ``Git add ;``. So before it reads a message, every span that must stay verbatim is
swapped for a placeholder of private-use characters that no rewrite touches and no sentence
split breaks, and the spans are put back into the finished observation:

* fenced code blocks (a long one is cut to its first lines, with the count of the rest);
* unfenced code: a run of lines that read as code (indented, ``def``/``class``/``import``
  lines, lines ending in ``{`` or ``;``);
* ``inline code`` in backticks;
* a line that is a shell command (``$ ...`` or a known command such as ``git``, ``pip``);
* paths and URLs (``.git/objects/ab/cd``, ``src/app.py``, ``https://...``);
* photo captions (``[shares a photo: ...]``), kept as one balanced ``[photo: ...]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

__all__ = ["Verbatim"]

_OPEN: Final = "\ue000"
_CLOSE: Final = "\ue001"
_PLACEHOLDER = re.compile(_OPEN + r"(\d+)" + _CLOSE)
_CODE_LINES: Final = 12
_CODE_CHARS: Final = 600
_FENCE = re.compile(r"```[^\n`]*\n.*?(?:```|\Z)", re.S)
_INLINE = re.compile(r"`[^`\n]+`")
_CAPTION = re.compile(r"\[shares a photo: (?P<caption>[^\]]*)\]")
_COMMANDS: Final = (
    "git pip pip3 npm npx yarn pnpm python python3 pytest cd ls grep rg cargo docker "
    "kubectl curl wget mkdir rm mv cp chmod chown sed awk uv poetry node bash sh sudo brew "
    "apt apt-get ruff mypy tsc bun deno gh ssh scp tar unzip psql sqlite3"
).split()
_COMMAND_LINE = re.compile(
    r"^[ \t]*(?:\$ \S[^\n]*|(?:" + "|".join(re.escape(c) for c in _COMMANDS) + r")(?: [^\n]*)?)$",
    re.M,
)
_CODE_LINE = re.compile(
    r"^(?:(?: {4}|\t)\S.*|(?:async )?def \w+\(.*|class \w+.*:|import \w[\w.]*(?: as \w+)?|"
    r"from [\w.]+ import .+|(?:const|let|var|function|fn|pub|func|package|#include)\b.*|"
    r">>> .*|@\w[\w.]*(?:\(.*\))?|.*[{;]|[)}\]]+[,;]?)$"
)
_URL = r"[A-Za-z][A-Za-z0-9+.-]*://[^\s`'\"<>)\]]+"
# A path: a leading ``/``, ``./``, ``../`` or ``~/`` and a segment, or two segments or more
# with the last one holding a dot (``src/app.py``) or three segments or more.
_SEGMENT = r"[\w.@+-]+"
_PATH = (
    rf"(?:~|\.{{1,2}})?/{_SEGMENT}(?:/{_SEGMENT})*/?"
    rf"|{_SEGMENT}(?:/{_SEGMENT}){{2,}}/?"
    rf"|{_SEGMENT}/[\w@+-]*\.[\w.@+-]*\w"
)
_FILE = (
    r"[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|js|mjs|ts|tsx|jsx|json|jsonl|md|rst|txt|toml|yaml|yml|cfg|"
    r"ini|sh|rs|go|java|kt|c|h|cc|cpp|hpp|rb|php|lock|sql|html|css|scss|log|csv|db|env|xml)"
)
_TOKEN = re.compile(
    rf"(?<![\w/.~]){_URL}|(?<![\w/.~])(?:{_PATH})(?![\w/])|(?<![\w/.~]){_FILE}(?![\w/])"
)
_TRAILING = ".,;:!?"


@dataclass
class Verbatim:
    """The spans one observer run swapped out, shared by every draft of the run."""

    spans: list[str] = field(default_factory=list)

    def hold(self, text: str) -> str:
        """A placeholder for ``text``, which is put back as it is."""
        return self._hold(text)

    def _hold(self, text: str) -> str:
        self.spans.append(text)
        return f"{_OPEN}{len(self.spans) - 1}{_CLOSE}"

    def protect(self, text: str) -> str:
        """``text`` with each verbatim span replaced by a placeholder."""
        text = _FENCE.sub(lambda m: self._hold(_code_block(m[0])), text)
        text = _unfenced_code(text, self._hold)
        text = _CAPTION.sub(
            lambda m: self._hold(f"[photo: {' '.join(m['caption'].split())}]"), text
        )
        text = _INLINE.sub(lambda m: self._hold(m[0]), text)
        text = _COMMAND_LINE.sub(self._command, text)
        return _TOKEN.sub(self._token, text)

    def _command(self, match: re.Match[str]) -> str:
        line = match[0].strip()
        if not line.startswith("$ ") and _reads_as_prose(line):
            return match[0]  # "git is hard to learn": a sentence about git, not a command
        return self._hold(f"`{line}`")

    def _token(self, match: re.Match[str]) -> str:
        token = match[0]
        # A sentence's full stop after a path is prose, not part of the path.
        core = token.rstrip(_TRAILING)
        if not core or (core.startswith("/") and core.count("/") == 1 and "." not in core):
            return token  # "/" alone or "/s": a slash in prose
        return self._hold(core) + token[len(core) :]

    def restore(self, text: str) -> str:
        """``text`` with each placeholder back as the span it holds."""
        for _ in range(3):  # a span may hold another (a path inside a caption)
            if _OPEN not in text:
                break
            text = _PLACEHOLDER.sub(lambda m: self.spans[int(m[1])], text)
        return text

    def ends_with_code(self, text: str) -> bool:
        """Whether ``text`` ends in code or a command (which no full stop may follow)."""
        last = list(_PLACEHOLDER.finditer(text))
        return (
            bool(last) and last[-1].end() == len(text) and self.spans[int(last[-1][1])][:1] == "`"
        )

    @staticmethod
    def without_spans(text: str) -> str:
        """``text`` with its placeholders left out (their digits are no number of it)."""
        return _PLACEHOLDER.sub(" ", text)

    @staticmethod
    def holds(text: str) -> bool:
        """Whether ``text`` holds a verbatim span (which is content, never chatter)."""
        return _OPEN in text


_PROSE_WORDS: Final = frozenset(
    "is are was were be been the a an so and but i you we it that this to of for my your "
    "our has have had very really just".split()
)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def _reads_as_prose(line: str) -> bool:
    """Whether a line that opens with a command's name is a sentence: its words outside
    quotes hold a word of prose ("python is great", "git was down")."""
    words = _QUOTED.sub(" ", line).lower().split()[1:]
    return any(word.strip(",.!?;:") in _PROSE_WORDS for word in words)


def _code_block(block: str) -> str:
    """A fenced block as it was, or its first lines and how many more when it is long."""
    body = block.rstrip()
    if not body.endswith("```") or body.count("\n") < 1:
        body += "\n```"
    lines = body.split("\n")
    if len(body) <= _CODE_CHARS and len(lines) <= _CODE_LINES + 2:
        return body
    head, inner = lines[0], lines[1:-1]
    kept: list[str] = []
    size = len(head)
    for line in inner[:_CODE_LINES]:
        if size + len(line) + 1 > _CODE_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    more = len(inner) - len(kept)
    return "\n".join([head, *kept, f"… (+{more} more lines)", "```"])


def _unfenced_code(text: str, hold: Callable[[str], str]) -> str:
    """Runs of two lines or more that read as code, fenced and held."""
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        end = index
        while end < len(lines) and lines[end].strip() and _CODE_LINE.match(lines[end]):
            end += 1
        if end - index >= 2 and any(_is_code_start(line) for line in lines[index:end]):
            out.append(hold(_code_block("```\n" + "\n".join(lines[index:end]) + "\n```")))
            index = end
            continue
        out.append(lines[index])
        index += 1
    return "\n".join(out)


def _is_code_start(line: str) -> bool:
    stripped = line.strip()
    return bool(
        re.match(r"(?:def|class|async def|import|from \S+ import|function|const|fn)\b", stripped)
        or stripped.endswith(("{", ";"))
    )
