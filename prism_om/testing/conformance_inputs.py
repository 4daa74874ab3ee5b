"""Conformance tests for bad arguments and unstorable entries, every adapter alike.

``StoreConformance`` inherits ``InputsConformance``, so an adapter that runs the suite
runs these too. For each kind of argument of the ``SessionStore`` methods (session id,
entry id, leaf id, cursor, count, page limit, direction, iterables of ids, the batch of
an append) a bad value is refused with the typed error of ``prism_om.stores.arguments``,
naming the argument in ``field``, before anything is read or written; no ``TypeError``,
``OverflowError``, ``RecursionError`` or driver error escapes. Besides fixed cases, each
kind is tried with bad values that hypothesis draws (from a fixed seed, so every adapter
meets the same ones). Entries are held to one rule too: no NUL in a field a SQL store
keeps as text (PostgreSQL cannot), ``data`` nested at most ``MAX_ENTRY_DEPTH`` levels.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.ledger_views import restrict_ledger
from ..core.records import OBSERVATIONS_RECORDED
from ..entries import (
    MAX_ENTRY_DEPTH,
    SessionEntry,
    ToolCall,
    custom_entry,
    entry_from_wire,
    message_entry,
)
from ..errors import (
    InvalidEntryError,
    InvalidIdError,
    InvalidInputError,
    InvalidSessionIdError,
    MemoryRecordError,
    PageTooLargeError,
    PrismMemoryError,
)
from ..stores.base import SessionStore
from ._requires import hypothesis, pytest, st
from .generate import make_message

__all__ = [
    "InputsConformance",
    "bad_counts",
    "bad_directions",
    "bad_ids",
    "bad_limits",
    "drawn",
]

_TS = "2024-05-01T10:00:00Z"
_SID = "s1"
# Observation ids the seeded branch records.
_OBSERVED = ("0a0a0a0a0a0a", "0b0b0b0b0b0b")

Call = Callable[[SessionStore, Any], Awaitable[object]]


# -- bad values ------------------------------------------------------------------------


def _nested(levels: int) -> object:
    """A list nested ``levels`` deep, built without recursion."""
    value: object = "x"
    for _ in range(levels):
        value = [value]
    return value


def _spliced(piece: str) -> Any:
    """Strings with ``piece`` somewhere in them."""
    return st.tuples(st.text(max_size=6), st.text(max_size=6)).map(lambda p: p[0] + piece + p[1])


def bad_ids() -> Any:
    """Values no entry id can be: not strings, empty, too long, with a NUL or a lone
    surrogate (None is left out: where an id is optional, None is a good value)."""
    return st.one_of(
        st.integers(),
        st.floats(),
        st.booleans(),
        st.binary(max_size=8),
        st.lists(st.text(max_size=4), max_size=3),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        st.just(""),
        st.text(min_size=257, max_size=300),
        _spliced("\x00"),
        _spliced("\ud800"),
    )


def bad_counts() -> Any:
    """Values that are no count of ``recent_messages`` (an int from 0 to 2**53 - 1)."""
    return st.one_of(
        st.integers(max_value=-1),
        st.integers(min_value=2**53),
        st.booleans(),
        st.floats(),
        st.text(max_size=3),
        st.none(),
        st.lists(st.integers(), max_size=2),
    )


def bad_limits() -> Any:
    """Values that are no page limit (an int from 1 to 100)."""
    return st.one_of(
        st.integers(max_value=0),
        st.integers(min_value=101),
        st.booleans(),
        st.floats(),
        st.text(max_size=3),
        st.none(),
    )


def bad_directions() -> Any:
    """Values that are neither ``"forward"`` nor ``"backward"``."""
    return st.one_of(
        st.text(max_size=9).filter(lambda t: t not in ("forward", "backward")),
        st.integers(),
        st.none(),
        st.lists(st.just("forward"), max_size=2),
    )


def drawn(strategy: Any, count: int = 30) -> list[Any]:
    """Up to ``count`` values of ``strategy``, the same ones on every run and adapter
    (hypothesis with a fixed seed), for an async test to try one by one."""
    values: list[Any] = []

    @hypothesis.settings(
        max_examples=count,
        database=None,
        deadline=None,
        derandomize=True,
        phases=[hypothesis.Phase.generate],
        suppress_health_check=[
            hypothesis.HealthCheck.too_slow,
            hypothesis.HealthCheck.filter_too_much,
            hypothesis.HealthCheck.data_too_large,
        ],
    )
    @hypothesis.given(strategy)
    def collect(value: Any) -> None:
        values.append(value)

    collect()
    return values


# Fixed cases of each kind, tried besides the drawn ones.
_FIXED_BAD_IDS: list[object] = [
    5,
    10**5000,
    5.0,
    True,
    b"m0",
    ["m0"],
    ("m0",),
    {"id": "m0"},
    object(),
    "",
    "x" * 257,
    "m0\x00",
    "\x00",
    "m0\ud800",
    _nested(100_000),
]
_FIXED_BAD_COUNTS: list[object] = [
    -1,
    2**53,
    2**63,
    -(2**63),
    10**5000,
    True,
    False,
    "3",
    3.0,
    float("nan"),
    None,
    _nested(100_000),
]


# -- the calls, each with the argument it passes the value as ----------------------------

# An entry id that must be given.
_ID_CALLS: dict[str, tuple[str, Call]] = {
    "get": ("entry_id", lambda s, v: s.get(v)),
    "checkout": ("entry_id", lambda s, v: s.checkout(_SID, v)),
    "is_on_branch": ("entry_id", lambda s, v: s.is_on_branch(_SID, v)),
    "page_messages": ("cursor", lambda s, v: s.page_messages(_SID, v, 10)),
    "page_message_parts": ("cursor", lambda s, v: s.page_message_parts(_SID, v, 10)),
    "memory_with_sources": ("memory_id", lambda s, v: s.memory_with_sources(_SID, v)),
}
# An id that may be None.
_LEAF_CALLS: dict[str, tuple[str, Call]] = {
    "entries": ("leaf_id", lambda s, v: s.entries(_SID, v)),
    "memory_head": ("leaf_id", lambda s, v: s.memory_head(_SID, v)),
    "is_on_branch(leaf)": ("leaf_id", lambda s, v: s.is_on_branch(_SID, "m0", v)),
    "ledger": ("leaf_id", lambda s, v: s.ledger(_SID, v)),
    "live_ledger": ("leaf_id", lambda s, v: s.live_ledger(_SID, v)),
    "memory_subset": ("leaf_id", lambda s, v: s.memory_subset(_SID, [_OBSERVED[0]], v)),
    "taken_memory_ids": ("leaf_id", lambda s, v: s.taken_memory_ids(_SID, [_OBSERVED[0]], v)),
    "scope_map": ("leaf_id", lambda s, v: s.scope_map(_SID, v)),
    "recent_messages": ("leaf_id", lambda s, v: s.recent_messages(_SID, 5, v)),
    "entries_after": ("after_id", lambda s, v: s.entries_after(_SID, v)),
    "entries_after(leaf)": ("leaf_id", lambda s, v: s.entries_after(_SID, None, v)),
    "page_messages(leaf)": ("leaf_id", lambda s, v: s.page_messages(_SID, "m0", 10, "forward", v)),
    "entry_count": ("leaf_id", lambda s, v: s.entry_count(_SID, v)),
    "branch_tokens": ("leaf_id", lambda s, v: s.branch_tokens(_SID, v)),
    "last_compaction": ("leaf_id", lambda s, v: s.last_compaction(_SID, v)),
    "marked_data": ("leaf_id", lambda s, v: s.marked_data(_SID, OBSERVATIONS_RECORDED, v)),
    "page_message_parts(leaf)": (
        "leaf_id",
        lambda s, v: s.page_message_parts(_SID, "m0", 10, "forward", v),
    ),
    "snapshot": ("leaf_id", lambda s, v: s.snapshot(_SID, leaf_id=v)),
    "append_at_leaf": (
        "expected_memory_head",
        lambda s, v: s.append_at_leaf([_message("new", None)], expected_memory_head=v),
    ),
}
# An iterable of ids.
_ID_LIST_CALLS: dict[str, tuple[str, Call]] = {
    "get_many": ("entry_ids", lambda s, v: s.get_many(v)),
    "memory_subset": ("memory_ids", lambda s, v: s.memory_subset(_SID, v)),
    "taken_memory_ids": ("memory_ids", lambda s, v: s.taken_memory_ids(_SID, v)),
}
# A session id.
_SESSION_CALLS: dict[str, Call] = {
    "list": lambda s, v: s.list(v),
    "leaves": lambda s, v: s.leaves(v),
    "leaf": lambda s, v: s.leaf(v),
    "entries": lambda s, v: s.entries(v),
    "memory_head": lambda s, v: s.memory_head(v),
    "checkout": lambda s, v: s.checkout(v, "m0"),
    "is_on_branch": lambda s, v: s.is_on_branch(v, "m0"),
    "ledger": lambda s, v: s.ledger(v),
    "live_ledger": lambda s, v: s.live_ledger(v),
    "memory_subset": lambda s, v: s.memory_subset(v, [_OBSERVED[0]]),
    "taken_memory_ids": lambda s, v: s.taken_memory_ids(v, [_OBSERVED[0]]),
    "scope_map": lambda s, v: s.scope_map(v),
    "recent_messages": lambda s, v: s.recent_messages(v, 5),
    "entries_after": lambda s, v: s.entries_after(v, None),
    "page_messages": lambda s, v: s.page_messages(v, "m0", 10),
    "entry_count": lambda s, v: s.entry_count(v),
    "branch_tokens": lambda s, v: s.branch_tokens(v),
    "last_compaction": lambda s, v: s.last_compaction(v),
    "marked_data": lambda s, v: s.marked_data(v, OBSERVATIONS_RECORDED),
    "page_message_parts": lambda s, v: s.page_message_parts(v, "m0", 10),
    "memory_with_sources": lambda s, v: s.memory_with_sources(v, _OBSERVED[0]),
    "snapshot": lambda s, v: s.snapshot(v),
    "delete_session": lambda s, v: s.delete_session(v),
}
# The batch of an append.
_BATCH_CALLS: dict[str, Call] = {
    "append_many": lambda s, v: s.append_many(v),
    "append_at_leaf": lambda s, v: s.append_at_leaf(v),
}


def _message(entry_id: str, parent: str | None, text: str = "hello") -> SessionEntry:
    return make_message(_SID, entry_id, parent, "user", text, 1)


def _observations() -> SessionEntry:
    items = [
        {"id": memory_id, "text": "fact", "sourceEntryIds": ["m0"], "observedAt": _TS}
        for memory_id in _OBSERVED
    ]
    data = {"type": OBSERVATIONS_RECORDED, "coversUpToId": "m1", "observations": items}
    return custom_entry(_SID, data, parent_id="m1", entry_id="obs", timestamp=_TS)


async def _state(store: SessionStore) -> object:
    """What a bad call must leave as it was."""
    listed = [e.to_wire() for e in await store.list(_SID)]
    return listed, await store.leaf(_SID), await store.leaves(_SID), await store.sessions()


async def _refused(call: Awaitable[object]) -> PrismMemoryError:
    """The typed error ``call`` raises; any other outcome fails, naming it."""
    try:
        result = await call
    except PrismMemoryError as exc:
        return exc
    except Exception as exc:  # the failure is the point: an untyped error escaped
        raise AssertionError(f"untyped {type(exc).__name__}: {exc}"[:300]) from exc
    raise AssertionError(f"accepted, answering a {type(result).__name__}")


def _expect(exc: PrismMemoryError, kind: type[PrismMemoryError], field: str, case: str) -> None:
    assert isinstance(exc, kind), f"{case}: {type(exc).__name__} ({exc}), not {kind.__name__}"
    assert getattr(exc, "field", None) == field, f"{case}: field {getattr(exc, 'field', None)!r}"


class InputsConformance:
    """Bad arguments and unstorable entries (uses the suite's ``store`` fixture)."""

    @pytest.fixture
    async def seeded(self, store: SessionStore) -> SessionStore:
        """The store with a branch of two messages and an observation record."""
        await store.append_many([_message("m0", None), _message("m1", "m0", "hi")])
        await store.append(_observations())
        return store

    # -- ids --------------------------------------------------------------------------

    async def test_bad_entry_ids_are_refused_naming_the_argument(
        self, seeded: SessionStore
    ) -> None:
        before = await _state(seeded)
        values = [*_FIXED_BAD_IDS, *drawn(bad_ids())]
        for name, (argument, call) in _ID_CALLS.items():
            for value in [None, *values]:
                case = f"{name}({argument}={type(value).__name__})"
                _expect(await _refused(call(seeded, value)), InvalidIdError, argument, case)
        for name, (argument, call) in _LEAF_CALLS.items():
            for value in values:
                case = f"{name}({argument}={type(value).__name__})"
                _expect(await _refused(call(seeded, value)), InvalidIdError, argument, case)
        assert await _state(seeded) == before

    async def test_an_id_no_entry_can_have_is_refused_not_looked_up(
        self, seeded: SessionStore
    ) -> None:
        """The NUL (PostgreSQL cannot compare it), the lone surrogate (no UTF-8 text holds
        one) and the over-long id: refused on every store, not "not found" on some."""
        for value in ("m0\x00", "m0\ud800", "m" * 257):
            exc = await _refused(seeded.get(value))
            _expect(exc, InvalidIdError, "entry_id", repr(value))
            assert exc.entry_id == value
        # Good ids that name nothing still answer "not found".
        assert await seeded.get("m" * 256) is None
        assert await seeded.get("m0\x01") is None

    async def test_bad_session_ids_are_refused_by_every_method(self, seeded: SessionStore) -> None:
        before = await _state(seeded)
        for name, call in _SESSION_CALLS.items():
            for value in (None, 5, b"s1", ["s1"], "", "../s1", "s1\x00", "s 1", "x" * 129):
                exc = await _refused(call(seeded, value))
                assert isinstance(exc, InvalidSessionIdError), f"{name}({value!r}): {exc!r}"
        assert await _state(seeded) == before

    # -- iterables of ids ---------------------------------------------------------------

    async def test_bad_id_iterables_are_refused(self, seeded: SessionStore) -> None:
        before = await _state(seeded)
        entry = _message("m9", None)
        for name, (argument, call) in _ID_LIST_CALLS.items():
            for value in (None, "m0", b"m0", 5, 5.0, True, entry, object()):
                exc = await _refused(call(seeded, value))
                case = f"{name}({type(value).__name__})"
                assert type(exc) is InvalidInputError, f"{case}: {type(exc).__name__}"
                assert exc.field == argument, case
            for item in [None, *_FIXED_BAD_IDS, *drawn(bad_ids(), 20)]:
                exc = await _refused(call(seeded, ["m0", item]))
                _expect(
                    exc, InvalidIdError, f"{argument}[1]", f"{name}([.., {type(item).__name__}])"
                )
        assert await _state(seeded) == before

    async def test_100k_ids_are_answered_on_every_store(self, seeded: SessionStore) -> None:
        many = [f"{n:012x}" for n in range(100_000)] + list(_OBSERVED)
        assert await seeded.taken_memory_ids(_SID, many) == set(_OBSERVED)
        wanted = set(many)
        ledger = await seeded.ledger(_SID)
        assert await seeded.memory_subset(_SID, many) == restrict_ledger(ledger, wanted)
        assert await seeded.memory_subset(_SID, many, "obs") == restrict_ledger(ledger, wanted)
        found = await seeded.get_many([f"e{n}" for n in range(100_000)] + ["m1", "m0"])
        assert sorted(found) == ["m0", "m1"]
        # Any iterable, read once.
        assert await seeded.taken_memory_ids(_SID, (i for i in _OBSERVED)) == set(_OBSERVED)

    # -- counts, limits, directions -----------------------------------------------------

    async def test_bad_counts_are_refused(self, seeded: SessionStore) -> None:
        for value in [*_FIXED_BAD_COUNTS, *drawn(bad_counts())]:
            exc = await _refused(seeded.recent_messages(_SID, value))
            case = f"recent_messages(count={type(value).__name__})"
            assert type(exc) is InvalidInputError, f"{case}: {type(exc).__name__} {exc}"
            assert exc.field == "count", case
        # The bounds themselves are counts.
        assert await seeded.recent_messages(_SID, 0) == []
        everything = await seeded.recent_messages(_SID, 2**53 - 1)
        assert [e.id for e in everything] == ["m0", "m1"]

    async def test_bad_custom_types_are_refused(self, seeded: SessionStore) -> None:
        for value in ["", "om\x00x", "om\ud800", None, 3, b"om.x", [OBSERVATIONS_RECORDED]]:
            exc = await _refused(seeded.marked_data(_SID, value))  # type: ignore[arg-type]
            case = f"marked_data(custom_type={value!r})"
            assert type(exc) is InvalidInputError, f"{case}: {type(exc).__name__} {exc}"
            assert exc.field == "custom_type", case

    async def test_bad_page_limits_and_directions_are_refused(self, seeded: SessionStore) -> None:
        for value in [2**63, 10**5000, _nested(100_000), *drawn(bad_limits())]:
            exc = await _refused(seeded.page_messages(_SID, "m0", value))
            case = f"page_messages(limit={type(value).__name__})"
            over = isinstance(value, int) and not isinstance(value, bool) and value > 100
            _expect(exc, PageTooLargeError if over else InvalidInputError, "limit", case)
        for value in [_nested(100_000), *drawn(bad_directions())]:
            exc = await _refused(seeded.page_messages(_SID, "m0", 10, value))
            _expect(exc, InvalidInputError, "direction", f"direction={type(value).__name__}")

    # -- batches ------------------------------------------------------------------------

    async def test_bad_batches_are_refused_and_nothing_is_stored(
        self, seeded: SessionStore
    ) -> None:
        before = await _state(seeded)
        entry = _message("m2", "m1")
        for name, call in _BATCH_CALLS.items():
            for value in (None, 5, 5.0, "abc", b"abc", entry, entry.to_wire(), object()):
                exc = await _refused(call(seeded, value))
                _expect(exc, InvalidEntryError, "entries", f"{name}({type(value).__name__})")
            for batch in (
                [None],
                [entry, 5],
                [entry, "m3"],
                [entry, entry.to_wire()],
                [_nested(10**5)],
            ):
                exc = await _refused(call(seeded, batch))
                where = f"entries[{len(batch) - 1}]"
                _expect(exc, InvalidEntryError, where, f"{name}([.., {type(batch[-1]).__name__}])")
        for value in (None, 5, "m2", entry.to_wire()):
            exc = await _refused(seeded.append(value))  # type: ignore[arg-type]
            _expect(exc, InvalidEntryError, "entries[0]", f"append({type(value).__name__})")
        assert await _state(seeded) == before

    async def test_copied_entries_with_non_string_fields_are_refused(
        self, seeded: SessionStore
    ) -> None:
        """``model_copy`` skips validation: the append still refuses what it made."""
        before = await _state(seeded)
        entry = _message("m2", "m1")
        for field, value in (
            ("id", 5),
            ("id", ["m2"]),
            ("id", ""),
            ("parent_id", 5),
            ("timestamp", 5),
        ):
            copied = entry.model_copy(update={field: value})
            for batch in ([copied], [_message("m3", "m1"), copied]):
                exc = await _refused(seeded.append_many(batch))
                _expect(exc, InvalidEntryError, field, f"{field}={value!r}")
        assert await _state(seeded) == before

    # -- NUL: refused where a SQL store keeps text, kept where it is escaped JSON ---------

    async def test_nul_in_an_entry_field_kept_as_text_is_refused(
        self, seeded: SessionStore
    ) -> None:
        before = await _state(seeded)
        entry = _message("m2", "m1")
        custom = custom_entry(_SID, {"type": "host.note"}, parent_id="m1", entry_id="c1")
        for field, copied in (
            ("id", entry.model_copy(update={"id": "m2\x00"})),
            ("parent_id", entry.model_copy(update={"parent_id": "m1\x00"})),
            ("timestamp", entry.model_copy(update={"timestamp": _TS + "\x00"})),
            ("data.type", custom.model_copy(update={"data": {"type": "host\x00note"}})),
        ):
            # Built from the wire, the entry is refused at once; copied, at the append.
            with pytest.raises(InvalidEntryError) as info:
                entry_from_wire(copied.to_wire())
            assert info.value.field == field
            for call in (seeded.append(copied), seeded.append_at_leaf([copied])):
                _expect(await _refused(call), InvalidEntryError, field, field)
        assert await _state(seeded) == before

    async def test_nul_in_text_and_data_is_stored_and_read_back(self, store_opener: Any) -> None:
        text = _message("m0", None, "before\x00after")
        data = custom_entry(
            _SID, {"type": "host.blob", "v": "a\x00b", "k\x00": [1]}, parent_id="m0", entry_id="c"
        )
        store = await store_opener.open()
        try:
            await store.append_many([text, data])
            assert await store.get("m0") == text and await store.get("c") == data
        finally:
            await store.close()
        if store_opener.persistent:
            async with await store_opener.open() as reopened:
                assert await reopened.list(_SID) == [text, data]

    async def test_a_record_citing_an_id_with_a_nul_is_refused_as_unsupported(
        self, seeded: SessionStore
    ) -> None:
        before = await _state(seeded)
        for sources, covers in ((["m0\x00"], "m1"), (["m0"], "m1\x00")):
            item = {"id": "0c0c0c0c0c0c", "text": "t", "sourceEntryIds": sources, "observedAt": _TS}
            data = {"type": OBSERVATIONS_RECORDED, "coversUpToId": covers, "observations": [item]}
            record = custom_entry(_SID, data, parent_id="obs", entry_id="o2", timestamp=_TS)
            exc = await _refused(seeded.append(record))
            assert isinstance(exc, MemoryRecordError), f"{type(exc).__name__}: {exc}"
        assert await _state(seeded) == before

    # -- nesting --------------------------------------------------------------------------

    async def test_data_nested_to_the_limit_is_stored_and_read_back(
        self, store_opener: Any
    ) -> None:
        # data is level 1, so its value under "v" may nest MAX_ENTRY_DEPTH - 1 levels.
        deepest = custom_entry(
            _SID, {"type": "host.tree", "v": _nested(MAX_ENTRY_DEPTH - 1)}, entry_id="d"
        )
        store = await store_opener.open()
        try:
            await store.append(deepest)
            assert await store.get("d") == deepest
        finally:
            await store.close()
        if store_opener.persistent:
            async with await store_opener.open() as reopened:
                assert await reopened.list(_SID) == [deepest]

    async def test_data_nested_past_the_limit_is_refused_at_any_depth(
        self, seeded: SessionStore
    ) -> None:
        before = await _state(seeded)
        base = custom_entry(_SID, {"type": "host.tree"}, parent_id="m1", entry_id="d")
        for levels in (MAX_ENTRY_DEPTH, 950, 960, 987, 1000, 100_000):
            value = _nested(levels)
            with pytest.raises(InvalidEntryError) as info:
                custom_entry(_SID, {"type": "host.tree", "v": value}, entry_id="d")
            assert (info.value.field or "").startswith("data.v"), levels
            copied = base.model_copy(update={"data": {"type": "host.tree", "v": value}})
            for call in (seeded.append(copied), seeded.append_at_leaf([copied])):
                exc = await _refused(call)
                _expect(exc, InvalidEntryError, str(info.value.field), f"{levels} levels")
            arguments = {"v": value}
            with pytest.raises(InvalidEntryError) as info:
                _assistant_call({"id": "c", "name": "f", "arguments": arguments})
            assert (info.value.field or "").startswith("message.tool_calls[0].arguments")
            shallow = _assistant_call({"id": "c", "name": "f", "arguments": {}})
            assert shallow.message is not None
            deep_call = ToolCall.model_construct(id="c", name="f", arguments=arguments)
            copied = shallow.model_copy(
                update={"message": shallow.message.model_copy(update={"tool_calls": [deep_call]})}
            )
            exc = await _refused(seeded.append(copied))
            _expect(exc, InvalidEntryError, str(info.value.field), f"{levels} levels, a call")
        assert await _state(seeded) == before

    # -- any value anywhere ---------------------------------------------------------------

    async def test_no_untyped_error_escapes_for_any_value(self, seeded: SessionStore) -> None:
        """Every argument of every method, given drawn values of every kind: a typed
        error or an answer, never another exception, and nothing changed."""
        before = await _state(seeded)
        values = drawn(_any_value(), 60)
        calls: list[Call] = [
            *(call for _, call in _ID_CALLS.values()),
            *(call for _, call in _LEAF_CALLS.values()),
            *(call for _, call in _ID_LIST_CALLS.values()),
            *_SESSION_CALLS.values(),
            *_BATCH_CALLS.values(),
            lambda s, v: s.recent_messages(_SID, v),
            lambda s, v: s.page_messages(_SID, "m0", v),
            lambda s, v: s.page_messages(_SID, "m0", 10, v),
            lambda s, v: s.marked_data(_SID, v),
            lambda s, v: s.append(v),
        ]
        for call in calls:
            for value in values:
                with contextlib.suppress(PrismMemoryError):
                    await call(seeded, value)
        assert await _state(seeded) == before


def _assistant_call(call: dict[str, Any]) -> SessionEntry:
    return message_entry(
        _SID, "assistant", "", parent_id="m1", entry_id="t", timestamp=_TS, tool_calls=[call]
    )


def _any_value() -> Any:
    """Values of every kind an argument could be given, good ones among them: the ids of
    the seeded branch are left out, so that no drawn value moves its leaf."""
    leaf_values = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=12),
        st.binary(max_size=6),
        _spliced("\x00"),
        _spliced("\ud800"),
    )
    return st.recursive(
        leaf_values, lambda inner: st.lists(inner, max_size=3), max_leaves=6
    ).filter(lambda v: v not in ("m0", "m1", "obs", _SID))
