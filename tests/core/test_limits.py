"""Worker limits, size caps and page limits of the specification."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from prism_om.core import limits as lim
from prism_om.core.limits import (
    MemoryWorkerLimits,
    resolve_memory_worker_limits,
    resolve_page_limit,
    validate_limit,
)
from prism_om.errors import (
    AmbiguousInputError,
    InvalidInputError,
    LimitExceededError,
    PageTooLargeError,
)

KIB, MIB = 1024, 1024 * 1024

# (long name, short name, default, hard cap), straight from the specification's table.
ROWS = [
    ("max_worker_turns", "max_turns", 16, 64),
    ("max_worker_tool_calls_per_turn", "max_tool_calls_per_turn", 32, 256),
    ("max_worker_tool_calls", "max_tool_calls", 128, 1024),
    ("max_worker_argument_bytes", "max_argument_bytes", 64 * KIB, 1 * MIB),
    ("max_worker_result_bytes", "max_result_bytes", 64 * KIB, 1 * MIB),
    ("max_worker_message_bytes", "max_message_bytes", 1 * MIB, 8 * MIB),
    ("max_worker_error_bytes", "max_error_bytes", 1 * KIB, 8 * KIB),
]


def test_named_constants() -> None:
    assert (lim.DEFAULT_MAX_WORKER_TURNS, lim.MAX_WORKER_TURNS_HARD_CAP) == (16, 64)
    assert (
        lim.DEFAULT_MAX_WORKER_TOOL_CALLS_PER_TURN,
        lim.MAX_WORKER_TOOL_CALLS_PER_TURN_HARD_CAP,
    ) == (32, 256)
    assert (lim.DEFAULT_MAX_WORKER_TOOL_CALLS, lim.MAX_WORKER_TOOL_CALLS_HARD_CAP) == (128, 1024)
    assert (lim.DEFAULT_MAX_WORKER_ARGUMENT_BYTES, lim.MAX_WORKER_ARGUMENT_BYTES_HARD_CAP) == (
        65_536,
        1_048_576,
    )
    assert (lim.DEFAULT_MAX_WORKER_RESULT_BYTES, lim.MAX_WORKER_RESULT_BYTES_HARD_CAP) == (
        65_536,
        1_048_576,
    )
    assert (lim.DEFAULT_MAX_WORKER_MESSAGE_BYTES, lim.MAX_WORKER_MESSAGE_BYTES_HARD_CAP) == (
        1_048_576,
        8_388_608,
    )
    assert (lim.DEFAULT_MAX_WORKER_ERROR_BYTES, lim.MAX_WORKER_ERROR_BYTES_HARD_CAP) == (
        1024,
        8192,
    )
    assert lim.RENDERED_MEMORY_MAX_BYTES == 256 * KIB
    assert lim.FOLDED_PAYLOAD_MAX_BYTES == 512 * KIB
    assert lim.RECENT_WINDOW_MAX_BYTES == 512 * KIB
    assert (lim.PAGE_LIMIT_DEFAULT, lim.PAGE_LIMIT_HARD_CAP) == (20, 100)
    assert lim.MAX_SAFE_INTEGER == 2**53 - 1


@pytest.mark.parametrize(("long", "short", "default", "cap"), ROWS)
def test_row_default_and_cap(long: str, short: str, default: int, cap: int) -> None:
    assert getattr(MemoryWorkerLimits(), long) == default
    assert getattr(resolve_memory_worker_limits(), long) == default
    assert lim.WORKER_LIMIT_DEFAULTS[long] == default
    assert lim.WORKER_LIMIT_HARD_CAPS[long] == cap
    assert lim.WORKER_LIMIT_SHORT_NAMES[short] == long
    for name in (long, short):
        assert getattr(resolve_memory_worker_limits(**{name: cap}), long) == cap
        assert getattr(resolve_memory_worker_limits(**{name: 1}), long) == 1
        with pytest.raises(LimitExceededError) as info:
            resolve_memory_worker_limits(**{name: cap + 1})
        assert name in str(info.value)
        assert str(cap + 1) in str(info.value)
        assert str(cap) in str(info.value)


def test_table_covers_every_field() -> None:
    fields = [field.name for field in dataclasses.fields(MemoryWorkerLimits)]
    assert fields == [row[0] for row in ROWS]


INVALID: list[Any] = [
    (True, "positive integer"),
    (False, "positive integer"),
    (1.5, "positive integer"),
    (16.0, "positive integer"),
    (float("nan"), "positive integer"),
    (float("inf"), "positive integer"),
    (float("-inf"), "positive integer"),
    (0, "positive integer"),
    (-1, "positive integer"),
    ("16", "positive integer"),
    (2**53, "safe integer"),
    # Shown as its size: str() of an int this long raises ValueError.
    pytest.param(10**5000, "safe integer", id="10**5000"),
    pytest.param(-(10**5000), "positive integer", id="-10**5000"),
    ([[[1]]], "positive integer"),
]


@pytest.mark.parametrize(("value", "message"), INVALID)
@pytest.mark.parametrize("name", ["max_worker_tool_calls", "max_tool_calls"])
def test_invalid_values_name_the_field(value: Any, message: str, name: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as info:
        resolve_memory_worker_limits(**{name: value})
    assert not isinstance(info.value, LimitExceededError)
    assert name in str(info.value)


@pytest.mark.parametrize(("value", "message"), INVALID)
def test_agent_max_turns_is_validated(value: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=f"agent_max_turns.*{message}"):
        resolve_memory_worker_limits(agent_max_turns=value)


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(LimitExceededError, match="max_worker_error_bytes"):
        MemoryWorkerLimits(max_worker_error_bytes=8 * KIB + 1)
    with pytest.raises(InvalidInputError, match="max_worker_turns"):
        MemoryWorkerLimits(max_worker_turns=0)


def test_limits_are_frozen() -> None:
    limits = MemoryWorkerLimits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_worker_turns = 3  # type: ignore[misc]


def test_max_worker_turns_overrides_agent_max_turns() -> None:
    assert resolve_memory_worker_limits(agent_max_turns=8).max_worker_turns == 8
    assert resolve_memory_worker_limits(agent_max_turns=8, max_worker_turns=4).max_worker_turns == 4
    assert resolve_memory_worker_limits(agent_max_turns=8, max_turns=5).max_worker_turns == 5
    with pytest.raises(LimitExceededError, match="agent_max_turns"):
        resolve_memory_worker_limits(agent_max_turns=65)


@pytest.mark.parametrize(("long", "short", "default", "cap"), ROWS)
def test_both_names_of_one_limit_is_ambiguous(
    long: str, short: str, default: int, cap: int
) -> None:
    with pytest.raises(AmbiguousInputError) as info:
        resolve_memory_worker_limits(**{long: 2, short: 2})
    assert long in str(info.value)
    assert short in str(info.value)


def test_none_counts_as_not_given() -> None:
    limits = resolve_memory_worker_limits(max_worker_turns=None, max_turns=3, max_tool_calls=None)
    assert limits.max_worker_turns == 3
    assert limits.max_worker_tool_calls == 128


@pytest.mark.parametrize("name", ["max_worker_turn", "maxWorkerTurns", "turns", "max_pages"])
def test_unknown_limit_names(name: str) -> None:
    with pytest.raises(InvalidInputError, match=name):
        resolve_memory_worker_limits(**{name: 1})


def test_mixed_names_resolve_together() -> None:
    limits = resolve_memory_worker_limits(
        agent_max_turns=10,
        max_tool_calls_per_turn=8,
        max_worker_tool_calls=40,
        max_result_bytes=1000,
        max_worker_error_bytes=2000,
    )
    assert limits == MemoryWorkerLimits(
        max_worker_turns=10,
        max_worker_tool_calls_per_turn=8,
        max_worker_tool_calls=40,
        max_worker_result_bytes=1000,
        max_worker_error_bytes=2000,
    )
    short = limits.as_worker_options()
    assert short["max_turns"] == 10
    assert short["max_tool_calls"] == 40
    assert set(short) == set(lim.WORKER_LIMIT_SHORT_NAMES)
    assert resolve_memory_worker_limits(**short) == limits


def test_validate_limit_without_cap() -> None:
    assert validate_limit("n", 2**53 - 1) == 2**53 - 1
    with pytest.raises(InvalidInputError, match="n must"):
        validate_limit("n", 0)


# --- page limit --------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "expected"), [(None, 20), (1, 1), (20, 20), (100, 100)])
def test_page_limit(limit: int | None, expected: int) -> None:
    assert resolve_page_limit(limit) == expected


def test_page_limit_default_is_configurable() -> None:
    assert resolve_page_limit(None, 50) == 50
    assert resolve_page_limit(7, 50) == 7
    with pytest.raises(PageTooLargeError):
        resolve_page_limit(None, 101)


@pytest.mark.parametrize("limit", [101, 1000, 2**60, pytest.param(10**5000, id="10**5000")])
def test_page_limit_above_cap(limit: int) -> None:
    with pytest.raises(PageTooLargeError, match="100"):
        resolve_page_limit(limit)


@pytest.mark.parametrize(
    "limit", [0, -1, True, 2.0, 1.5, float("nan"), "20", pytest.param(-(10**5000), id="-10**5000")]
)
def test_page_limit_invalid(limit: Any) -> None:
    with pytest.raises(InvalidInputError, match="limit") as info:
        resolve_page_limit(limit)
    assert not isinstance(info.value, PageTooLargeError)
    assert info.value.field == "limit"


def test_a_page_limit_nested_past_repr_is_named_by_its_type() -> None:
    value: Any = 1
    for _ in range(100_000):
        value = [value]
    with pytest.raises(InvalidInputError, match="got a list"):
        resolve_page_limit(value)
