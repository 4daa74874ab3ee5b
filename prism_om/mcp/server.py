"""The Model Context Protocol server of ``prism-om mcp``: a store's memory as MCP tools.

Built on the official ``mcp`` SDK (``MCPServer``), over one store opened for the server's
lifetime. Tools, each answering JSON:

* ``list_sessions``: the store's sessions with their counts;
* ``memory_status`` / ``memory_view``: ``om:status`` and ``om:view`` of a session (``view``
  ``visible`` or ``full``, its whole answer within ``max_tokens``), the status with the
  transcript's tokens and the thresholds;
* ``recall``: the recall tool itself, unchanged (exact id, or a page of messages by cursor,
  with its caps and fail-closed rules), for the session the call names;
* ``search_memory``: ranked search of the session's active observations, reflections
  and messages (``SessionStore.search``, ``docs/search.md``), every hit with its sources;
* with ``allow_write`` only: ``append_message`` and ``observe`` (the offline workers).

The server reports the installed package's version; docs/mcp.md lists every tool's
arguments (a test holds it to the schemas ``list_tools`` gives).

Every result passes the secrets redaction (the read paths redact as they render;
``list_sessions``, ``search_memory`` and the write tools' answers are redacted here), and
what the store's tombstones revoke is withheld on every read, as in the CLI's read
commands. A bad argument, an unknown session or a store failure is a tool error naming
what was wrong (redacted too), never a crash of the server. Arguments are validated
strictly (no ``"5"`` for 5, ``true`` for 1 or ``"yes"`` for true), and an argument the
SDK's schema check refuses is reported the same way: one line naming the argument and
what it should be, never echoing the value. The write tools refuse ``tombstones.*``
sessions, which record revocations, as ``prism-om delete`` does.

``search_memory`` is a deliberate extension beyond the specification (docs/design.md,
"Search beside recall"): the specification's "recall is exact-id only; no search, no
transcript browser" still holds for the ``recall`` tool, which stays exact-id and cursor
paging. The search is the store's (``SessionStore.search``): withheld by the rule every
read path shares, judged on the full ledger once anything is revoked (a reflection resting
on an observation that the revocation's drop handler already dropped is withheld too), its
snippets redacted and a query term of a secret dropped, so a query cannot confirm a
secret; dropped and superseded memory only with ``include_inactive``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, Literal, ParamSpec

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import Tool as MCPTool
from mcp_types import ToolAnnotations
from pydantic import StrictBool, StrictInt, StrictStr, ValidationError

from ..core.redaction import Redactor
from ..core.shown import shown
from ..entries import validate_session_id
from ..errors import InvalidInputError, PrismMemoryError, SessionNotFoundError
from ..observational_memory import (
    create_memory_status_command,
    create_memory_view_command,
    create_recall_memory_tool,
)
from ..observational_memory.search import search_observational_memory
from ..stores import SessionStore
from ..stores.search import SEARCH_LIMIT_HARD_CAP, SEARCH_QUERY_MAX_CHARS

__all__ = [
    "SEARCH_LIMIT_HARD_CAP",
    "SEARCH_QUERY_MAX_CHARS",
    "VIEW_MAX_TOKENS_DEFAULT",
    "create_mcp_server",
    "package_version",
]

SESSIONS_LIMIT_HARD_CAP: Final = 1000
# memory_view's token budget for its whole answer: by default a few pages of memory, so
# one call never floods a client's context (a long dialog's full view was 44 KB).
VIEW_MAX_TOKENS_DEFAULT: Final = 4000
VIEW_MAX_TOKENS_MIN: Final = 200
VIEW_MAX_TOKENS_CAP: Final = 200_000
_MESSAGE_ROLES: Final = ("user", "assistant")

_P = ParamSpec("_P")
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


class _StrictServer(MCPServer):
    """``MCPServer`` whose argument-validation errors are short, typed and redacted, and
    which refuses an argument its tool does not take.

    The SDK reports a refused argument with pydantic's full text, which quotes the value
    (a secret pasted into ``mode`` came back verbatim) and runs over many lines; and it
    drops an unknown argument silently, so a misspelt ``sourcesOfset`` would read the
    first sources as if all was well.
    """

    redactor: Redactor
    # Each tool's parameter names, by tool name.
    parameters: dict[str, frozenset[str]]

    def add_strict_tool(self, tool: Callable[..., Any], annotations: ToolAnnotations) -> None:
        """``add_tool``, with the tool's parameters kept to refuse any other argument."""
        self.add_tool(tool, annotations=annotations)
        self.parameters[tool.__name__] = frozenset(inspect.signature(tool).parameters)

    async def list_tools(self) -> list[MCPTool]:
        # The schemas say what call_tool enforces: no argument beyond the listed ones.
        return [
            tool.model_copy(
                update={"input_schema": {**tool.input_schema, "additionalProperties": False}}
            )
            if tool.name in self.parameters
            else tool
            for tool in await super().list_tools()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        known = self.parameters.get(name)
        unknown = [key for key in arguments if known is not None and key not in known]
        if unknown:
            raise ToolError(self.redactor.text(_unknown_arguments(name, unknown, known or ())))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            raise ToolError(self.redactor.text(_argument_problems(name, cause))) from None


def _unknown_arguments(tool: str, unknown: list[str], known: Iterable[str]) -> str:
    """The arguments ``tool`` does not take, by name (cut short), and those it does."""
    names = ", ".join(shown(str(key)) for key in unknown[:5])
    more = f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else ""
    allowed = ", ".join(sorted(known))
    return (
        f"InvalidInputError: invalid arguments for {tool}: unknown argument {names}{more}; "
        f"{tool} takes {allowed}"
    )


def _argument_problems(tool: str, exc: ValidationError) -> str:
    """Which arguments were refused and why, without their values."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False)[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        problems.append(f"{where}: {error['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return f"InvalidInputError: invalid arguments for {tool}: {'; '.join(problems)}{more}"


class _Memory:
    """The tools' shared state: the store, the redactor, how revocation is read."""

    def __init__(
        self,
        store: SessionStore,
        redactor: Redactor,
        tombstone_scopes: Iterable[str] | None,
        recent_messages: int,
    ) -> None:
        self.store = store
        self.redactor = redactor
        self.scopes = list(tombstone_scopes or ()) or None
        self.recent_messages = recent_messages

    async def invalidated(self) -> frozenset[str]:
        """Read on every call: a tombstone written while the server runs counts at once."""
        from ..observational_memory.revocation import list_store_invalidated_ids

        return await list_store_invalidated_ids(self.store, self.scopes)

    async def session(self, session_id: object) -> str:
        """A valid session id the store holds, else a tool error naming it."""
        if not isinstance(session_id, str):
            raise InvalidInputError(f"session_id must be a string, got {type(session_id).__name__}")
        sid = validate_session_id(session_id)
        if await self.store.leaf(sid) is None:
            raise SessionNotFoundError(
                f"no session {sid!r} in {self.store.url} (list_sessions names them)",
                session_id=sid,
                url=self.store.url,
            )
        return sid


def _tool_errors(
    redactor: Redactor,
) -> Callable[[Callable[_P, Awaitable[dict[str, Any]]]], Callable[_P, Awaitable[dict[str, Any]]]]:
    """Turn every failure of a tool into a redacted ``ToolError``: the server stays up."""

    def wrap(
        tool: Callable[_P, Awaitable[dict[str, Any]]],
    ) -> Callable[_P, Awaitable[dict[str, Any]]]:
        @functools.wraps(tool)
        async def run(*args: _P.args, **kwargs: _P.kwargs) -> dict[str, Any]:
            try:
                return await tool(*args, **kwargs)
            except PrismMemoryError as exc:
                raise ToolError(redactor.text(f"{type(exc).__name__}: {exc}")) from None
            except Exception as exc:
                raise ToolError(redactor.text(f"unexpected {type(exc).__name__}: {exc}")) from None

        return run

    return wrap


def _checked_count(name: str, value: object, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidInputError(f"{name} must be an integer from 1 to {maximum}, got {value!r}")
    return value


def create_mcp_server(
    store: SessionStore,
    *,
    secrets: Iterable[str] | Redactor | None = None,
    allow_write: bool = False,
    tombstone_scopes: Iterable[str] | None = None,
    recent_messages: int = 8,
) -> MCPServer:
    """An ``MCPServer`` over ``store`` (which the caller opens and closes).

    Read-only unless ``allow_write``; ``secrets`` are redacted from every result;
    ``tombstone_scopes`` limits revocation to those scopes' tombstones (default: all);
    ``recent_messages`` is the ``context.recentMessages`` the agent uses, so status and
    view show what its context shows.
    """
    from ..core.redaction import redactor as make_redactor

    red = make_redactor(secrets)
    memory = _Memory(store, red, tombstone_scopes, recent_messages)
    guarded = _tool_errors(red)
    server = _StrictServer(
        name="prism-om",
        instructions=(
            "Durable, source-backed memory of long agent sessions. list_sessions names the "
            "sessions; memory_view shows a session's memory with 12-hex ids; recall fetches "
            "the exact source messages of an id, or pages raw history by cursor."
        ),
        log_level="WARNING",
        version=package_version(),
    )
    server.redactor = red
    server.parameters = {}

    @guarded
    async def list_sessions(limit: StrictInt = 200) -> dict[str, Any]:
        """The store's sessions (oldest first) with entry and message counts, leaves and
        last activity; at most ``limit`` (1-1000) of them."""
        from ..reports.session_list import session_rows

        limit = _checked_count("limit", limit, SESSIONS_LIMIT_HARD_CAP)
        rows = await session_rows(store)
        return red.value({"sessions": rows[:limit], "total": len(rows)})

    @guarded
    async def memory_status(session_id: StrictStr) -> dict[str, Any]:
        """Observational-memory counts of a session (om:status), its transcript's tokens
        and the thresholds at which the observer and reflector run."""
        from ..reports.thresholds import memory_thresholds

        sid = await memory.session(session_id)
        invalid = await memory.invalidated()
        command = create_memory_status_command(
            store=store,
            keep_recent_entries=memory.recent_messages,
            invalidated_ids=invalid,
            secrets=red,
        )
        result = await command.run("", session_id=sid)
        figures = await memory_thresholds(store, sid, invalid)
        return {**result.data, **figures, "text": result.text}

    @guarded
    async def memory_view(
        session_id: StrictStr,
        mode: Literal["visible", "full"] = "visible",
        max_tokens: StrictInt = VIEW_MAX_TOKENS_DEFAULT,
    ) -> dict[str, Any]:
        """The memory of a session (om:view): ``visible`` is what the agent's context shows
        now, ``full`` every active observation and reflection; ids are 12 hex characters.
        The whole answer holds at most ``max_tokens`` tokens (200-200000, default 4000):
        past it the text keeps its first lines, ``truncated`` is true and ``omittedIds``
        counts the memory left out."""
        if mode not in ("visible", "full"):
            raise InvalidInputError(f"mode must be 'visible' or 'full', got {mode!r}")
        if (
            isinstance(max_tokens, bool)
            or not isinstance(max_tokens, int)
            or not VIEW_MAX_TOKENS_MIN <= max_tokens <= VIEW_MAX_TOKENS_CAP
        ):
            raise InvalidInputError(
                f"max_tokens must be an integer from {VIEW_MAX_TOKENS_MIN} to "
                f"{VIEW_MAX_TOKENS_CAP}, got {max_tokens!r}"
            )
        sid = await memory.session(session_id)
        command = create_memory_view_command(
            store=store,
            keep_recent_entries=memory.recent_messages,
            invalidated_ids=await memory.invalidated(),
            secrets=red,
        )
        result = await command.run("full" if mode == "full" else "", session_id=sid)
        return within_budget({**result.data, "text": result.text}, max_tokens)

    recall_tool = create_recall_memory_tool(
        store=store, secrets=red, invalidated_ids=memory.invalidated
    )

    @guarded
    async def recall(
        session_id: StrictStr,
        id: StrictStr | None = None,
        cursor: StrictStr | None = None,
        limit: StrictInt | None = None,
        direction: Literal["forward", "backward"] | None = None,
        detail: Literal["summary", "full"] | None = None,
        sourcesOffset: StrictInt | None = None,
    ) -> dict[str, Any]:
        """Exact recall in a session: an observation or reflection by its 12-hex ``id``
        with its exact source messages (up to 100; ``sourcesOffset`` for more), or a page
        of raw messages around a message ``cursor`` (``limit`` 1-100, ``direction``,
        ``detail``). Exact lookup only; it does not search by topic."""
        sid = await memory.session(session_id)
        args = {
            "id": id,
            "cursor": cursor,
            "limit": limit,
            "direction": direction,
            "detail": detail,
            "sourcesOffset": sourcesOffset,
        }
        return await recall_tool.handler(args, session_id=sid)

    @guarded
    async def search_memory(
        session_id: StrictStr,
        query: StrictStr,
        limit: StrictInt = 10,
        kinds: list[Literal["observation", "reflection", "message"]] | None = None,
        include_inactive: StrictBool = False,
    ) -> dict[str, Any]:
        """Ranked keyword search of a session's active observations, reflections and
        messages (not semantic: use the words the conversation used); at most ``limit``
        (1-100) hits, best first, each with its kind, id, score, a snippet, its timestamp
        and sourceEntryIds. ``kinds`` keeps some kinds only; ``include_inactive`` adds
        dropped and superseded memory, marked by ``status``. Use recall with a hit's id
        (a memory id, or a message id as cursor) for its exact sources."""
        sid = await memory.session(session_id)
        results = await search_observational_memory(
            store,
            sid,
            query,
            limit=limit,
            kinds=kinds,
            include_inactive=include_inactive,
            invalidated_ids=await memory.invalidated(),
            secrets=red,
        )
        return red.value(results.to_json())

    for tool in (list_sessions, memory_status, memory_view, recall, search_memory):
        server.add_strict_tool(tool, _READ)
    if allow_write:
        for tool in _write_tools(memory, guarded):
            server.add_strict_tool(tool, _WRITE)
    return server


def package_version() -> str:
    """The installed prism-om's version, which the server reports to its clients."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prism-om")
    except PackageNotFoundError:  # a source tree never installed
        return "0+unknown"


_ID_LISTS: Final = (
    "reflectionIds",
    "observationIds",
    "sharedReflectionIds",
    "sharedObservationIds",
)


def within_budget(answer: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """``memory_view``'s answer cut to ``max_tokens`` tokens of JSON, as a client gets it.

    The text keeps its first lines (reflections first, as rendered), and each id list
    keeps the ids still in the text, so every id listed can be recalled from what was
    read; ``omittedIds`` counts the rest. The most lines that fit are found by bisection.
    """
    import json

    from ..tokens import get_estimator

    estimator = get_estimator()

    def tokens(value: dict[str, Any]) -> int:
        return estimator.count(json.dumps(value, ensure_ascii=False))

    whole = {**answer, "truncated": False, "maxTokens": max_tokens}
    if tokens(whole) <= max_tokens:
        return whole
    lines = str(answer.get("text", "")).split("\n")

    def cut(kept: int) -> dict[str, Any]:
        text = "\n".join(lines[:kept])
        out: dict[str, Any] = {**answer, "text": text, "truncated": True, "maxTokens": max_tokens}
        omitted = 0
        for key in _ID_LISTS:
            ids = [i for i in answer.get(key) or () if isinstance(i, str)]
            out[key] = [i for i in ids if i in text]
            omitted += len(ids) - len(out[key])
        out["omittedIds"] = omitted
        # Revoked ids are listed whole only when they fit: they say where memory was.
        if tokens(out) > max_tokens:
            out["revokedIds"] = [i for i in answer.get("revokedIds") or () if i in text]
        return out

    low, high = 0, len(lines)
    while low < high:  # the most lines whose answer fits
        middle = (low + high + 1) // 2
        if tokens(cut(middle)) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return cut(low)


def _writable_session(session_id: object) -> str:
    """A session id the write tools may write to: not a ``tombstones.*`` session."""
    from ..observational_memory.revocation import TOMBSTONE_SESSION_PREFIX

    if not isinstance(session_id, str):
        raise InvalidInputError("session_id must be a string")
    sid = validate_session_id(session_id)
    if sid.startswith(TOMBSTONE_SESSION_PREFIX):
        raise InvalidInputError(
            f"session {sid!r} records revocation tombstones; the MCP tools do not write to "
            "it (revoke through the deletion propagator instead)",
            session_id=sid,
        )
    return sid


def _write_tools(
    memory: _Memory,
    guarded: Callable[
        [Callable[..., Awaitable[dict[str, Any]]]], Callable[..., Awaitable[dict[str, Any]]]
    ],
) -> list[Callable[..., Awaitable[dict[str, Any]]]]:
    """``append_message`` and ``observe``: only on a server started with ``allow_write``."""
    from ..session import Session

    store, red = memory.store, memory.redactor

    @guarded
    async def append_message(
        session_id: StrictStr, role: Literal["user", "assistant"], text: StrictStr
    ) -> dict[str, Any]:
        """Append a user or assistant message at the session's current leaf (a new
        session id starts a session)."""
        if role not in _MESSAGE_ROLES:
            raise InvalidInputError(f"role must be 'user' or 'assistant', got {role!r}")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("text must be a non-empty string")
        session = Session(store, _writable_session(session_id))
        entry = await session.append_message(role, text)
        return red.value(
            {"sessionId": session.id, "entryId": entry.id, "parentId": entry.parent_id}
        )

    @guarded
    async def observe(session_id: StrictStr, force: StrictBool = False) -> dict[str, Any]:
        """Run the observer and reflector once on the session with the offline
        (extractive) workers; ``force`` ignores the token thresholds."""
        from ..reports.flush_report import flush_json
        from ..workers import OfflineMemoryProvider
        from ..workers.one_model import one_model_runtime

        if not isinstance(force, bool):
            raise InvalidInputError(f"force must be true or false, got {force!r}")
        sid = await memory.session(_writable_session(session_id))
        session = Session(store, sid)
        runtime = one_model_runtime(
            session,
            OfflineMemoryProvider(),
            "offline",
            secrets=red.secrets,
            invalidated_ids=await memory.invalidated(),
        )
        result = await runtime.flush(force=force)
        return red.value(flush_json(result))

    return [append_message, observe]
