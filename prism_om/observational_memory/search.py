"""Search beside recall: find a memory or a message by what it says, every hit with its
sources (``docs/search.md``).

``search_observational_memory`` is the Python API over ``SessionStore.search`` (ranked
lexical search over the branch's active observations, active reflections and eligible
messages, withheld and redacted like recall). ``create_search_memory_tool`` is the opt-in
agent tool over it: the agent's ``recall`` tool stays exact-id and cursor paging only, as
the specification says, and search is a separate capability a host adds on purpose. A
hit's ``id`` is what ``recall`` expands: a memory id (``{"id": ...}``) or a message id
(``{"cursor": ...}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..core.redaction import Redactor, redact_error, redactor
from ..core.withheld import InvalidationSource, check_invalidation_source, resolve_invalidation
from ..entries import validate_session_id
from ..errors import InvalidInputError, PrismMemoryError
from ..providers.base import ToolDefinition
from ..stores.base import SessionStore
from ..stores.search import (
    SEARCH_KINDS,
    SEARCH_LIMIT_HARD_CAP,
    SEARCH_QUERY_MAX_CHARS,
    SearchHit,
    SearchKind,
)

__all__ = [
    "SEARCH_TOOL_NAME",
    "SearchMemoryTool",
    "SearchResults",
    "create_search_memory_tool",
    "search_observational_memory",
]

SEARCH_TOOL_NAME: Final = "search_memory"


@dataclass(frozen=True)
class SearchResults:
    """The hits of one search, best first; ``to_json()`` is ``{"query", "results"}``."""

    query: str
    hits: tuple[SearchHit, ...]

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "results": [h.to_json() for h in self.hits]}


async def search_observational_memory(
    store: SessionStore,
    session_id: str,
    query: str,
    *,
    limit: int = 10,
    kinds: Iterable[SearchKind] | None = None,
    leaf_id: str | None = None,
    include_inactive: bool = False,
    invalidated_ids: InvalidationSource = None,
    secrets: Iterable[str] | Redactor | None = None,
) -> SearchResults:
    """Search one session's branch for ``query`` (``SessionStore.search``).

    ``invalidated_ids`` is a set, or a callable asked now (sync or async), as for recall
    (e.g. ``list_invalidated_ids``); ``secrets`` are redacted from every snippet, and a
    query term of a secret is dropped. The ``query`` of the result is redacted too.
    """
    source = check_invalidation_source(invalidated_ids)
    red = redactor(secrets)
    try:
        hits = await store.search(
            session_id,
            query,
            limit=limit,
            kinds=kinds,
            leaf_id=leaf_id,
            include_inactive=include_inactive,
            invalidated_ids=await resolve_invalidation(source),
            secrets=red,
        )
    except PrismMemoryError as exc:
        redact_error(exc, red)
        raise
    return SearchResults(red.text(query), tuple(hits))


_DESCRIPTION: Final = (
    "Search this session's memory and messages by what they say (ranked keyword search, "
    "not semantic: use the words the conversation would have used). Returns up to limit "
    "hits, best first, each with its kind (observation, reflection or message), id, a "
    "snippet, its timestamp and sourceEntryIds. Expand a hit with the recall tool: "
    "{id} for an observation or reflection, {cursor} for a message."
)


def _parameters() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["query"],
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": SEARCH_QUERY_MAX_CHARS,
                "description": "Words to look for.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": SEARCH_LIMIT_HARD_CAP,
                "description": "How many hits at most (default 10).",
            },
            "kinds": {
                "type": "array",
                "items": {"type": "string", "enum": list(SEARCH_KINDS)},
                "description": "Only these kinds of hit (default: all).",
            },
        },
    }


_KEYS: Final = frozenset({"query", "limit", "kinds"})


class SearchMemoryTool:
    """The opt-in ``search_memory`` tool: ``definition`` for the provider, ``handler``
    for dispatch (``{"query", "limit"?, "kinds"?}`` -> ``{"query", "results"}``)."""

    def __init__(
        self,
        store: SessionStore,
        *,
        secrets: Iterable[str] | Redactor | None = None,
        invalidated_ids: InvalidationSource = None,
        default_limit: int = 10,
    ) -> None:
        if isinstance(default_limit, bool) or not isinstance(default_limit, int):
            raise InvalidInputError("default_limit must be an integer", field="default_limit")
        if not 1 <= default_limit <= SEARCH_LIMIT_HARD_CAP:
            raise InvalidInputError(
                f"default_limit must be from 1 to {SEARCH_LIMIT_HARD_CAP}", field="default_limit"
            )
        self._store = store
        self._redactor = redactor(secrets)
        self._invalidated = check_invalidation_source(invalidated_ids)
        self._default_limit = default_limit
        self.definition = ToolDefinition(
            name=SEARCH_TOOL_NAME, description=_DESCRIPTION, parameters=_parameters()
        )

    @property
    def name(self) -> str:
        return self.definition.name

    async def handler(self, args: Mapping[str, Any], *, session_id: str) -> dict[str, Any]:
        """Answer one call for the calling session; a refused call raises a
        ``PrismMemoryError`` whose message has the secrets redacted."""
        try:
            if not isinstance(args, Mapping):
                raise InvalidInputError(
                    f"search arguments must be an object, got {type(args).__name__}"
                )
            unknown = [k for k in args if k not in _KEYS]
            if unknown:
                shown = ", ".join(repr(k)[:40] for k in unknown[:5])
                raise InvalidInputError(
                    f"unknown search argument(s) {shown}; allowed: query, limit, kinds"
                )
            given = {k: v for k, v in args.items() if v is not None}
            if "query" not in given:
                raise InvalidInputError("search needs a query", field="query")
            results = await search_observational_memory(
                self._store,
                validate_session_id(session_id),
                given["query"],
                limit=given.get("limit", self._default_limit),
                kinds=given.get("kinds"),
                invalidated_ids=self._invalidated,
                secrets=self._redactor,
            )
        except PrismMemoryError as exc:
            redact_error(exc, self._redactor)
            raise
        # Every string, ids included: a secret may sit inside an entry id.
        return self._redactor.value(results.to_json())


def create_search_memory_tool(
    *,
    store: SessionStore,
    secrets: Iterable[str] | Redactor | None = None,
    invalidated_ids: InvalidationSource = None,
    default_limit: int = 10,
) -> SearchMemoryTool:
    """The opt-in ``search_memory`` agent tool over ``store``.

    ``invalidated_ids`` (a set, or a callable asked on every call) is withheld as recall
    withholds it; ``secrets`` are redacted. Hits carry ids the ``recall`` tool expands.
    """
    return SearchMemoryTool(
        store, secrets=secrets, invalidated_ids=invalidated_ids, default_limit=default_limit
    )
