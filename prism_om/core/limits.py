"""The specification's worker limits and size caps, as named constants and one resolver.

Every worker limit is a finite positive safe integer (at most ``2**53 - 1``, the largest
integer a JSON number holds exactly) with a default and a hard cap:

=================================  ============  ===========
limit (runtime name)               default       hard cap
=================================  ============  ===========
``max_worker_turns``               16            64
``max_worker_tool_calls_per_turn`` 32            256
``max_worker_tool_calls``          128           1,024
``max_worker_argument_bytes``      64 KiB        1 MiB
``max_worker_result_bytes``        64 KiB        1 MiB
``max_worker_message_bytes``       1 MiB         8 MiB
``max_worker_error_bytes``         1 KiB         8 KiB
=================================  ============  ===========

Direct worker calls (``run_observer()`` and the others) take the same limits under shorter
names (``max_turns``, ``max_tool_calls``, ...); :func:`resolve_memory_worker_limits` accepts
either form.

Hard limits on what a store accepts and what recall returns, so that no single entry or
record makes an append, a validation or a recall unbounded (the same on every adapter):

=====================================  =========  ============================================
constant                               value      enforced by
=====================================  =========  ============================================
``MAX_ENTRY_BYTES``                    8 MiB      every append: an entry's serialised wire JSON
                                                  (UTF-8); ``EntryTooLargeError``
``MAX_ENTRY_DEPTH``                    128        every append and every entry built in Python:
                                                  levels of objects and arrays in ``data`` or
                                                  a tool call's ``arguments``;
                                                  ``InvalidEntryError``
``MAX_SOURCES_PER_OBSERVATION``        4,096      every append of ``om.observations.recorded``:
                                                  ``sourceEntryIds`` per observation;
                                                  ``MemoryRecordTooLargeError``
``MAX_OBSERVATIONS_PER_REFLECTION``    4,096      every append of ``om.reflections.recorded``:
                                                  ``observationIds`` per reflection;
                                                  ``MemoryRecordTooLargeError``
``MAX_SUPERSEDED_PER_REFLECTION``      1,024      every append of ``om.reflections.recorded``:
                                                  ``supersedesReflectionIds`` per reflection;
                                                  ``MemoryRecordTooLargeError``
``RECALL_SOURCES_DEFAULT_LIMIT``       100        recall: sources returned per call
                                                  (``sourcesTotal``; ``sources_offset`` reads
                                                  the rest)
``RECALL_SOURCES_HARD_CAP``            1,000      recall: the largest ``sources_limit``
=====================================  =========  ============================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Final

from ..entries import MAX_ENTRY_DEPTH
from ..errors import AmbiguousInputError, InvalidInputError, LimitExceededError, PageTooLargeError
from .shown import shown

__all__ = [
    "MAX_ENTRY_BYTES",
    "MAX_ENTRY_DEPTH",
    "MAX_OBSERVATIONS_PER_REFLECTION",
    "MAX_SOURCES_PER_OBSERVATION",
    "MAX_SUPERSEDED_PER_REFLECTION",
    "RECALL_SOURCES_DEFAULT_LIMIT",
    "RECALL_SOURCES_HARD_CAP",
    "DEFAULT_MAX_WORKER_ARGUMENT_BYTES",
    "DEFAULT_MAX_WORKER_ERROR_BYTES",
    "DEFAULT_MAX_WORKER_MESSAGE_BYTES",
    "DEFAULT_MAX_WORKER_RESULT_BYTES",
    "DEFAULT_MAX_WORKER_TOOL_CALLS",
    "DEFAULT_MAX_WORKER_TOOL_CALLS_PER_TURN",
    "DEFAULT_MAX_WORKER_TURNS",
    "FOLDED_PAYLOAD_MAX_BYTES",
    "KIB",
    "MAX_SAFE_INTEGER",
    "MAX_WORKER_ARGUMENT_BYTES_HARD_CAP",
    "MAX_WORKER_ERROR_BYTES_HARD_CAP",
    "MAX_WORKER_MESSAGE_BYTES_HARD_CAP",
    "MAX_WORKER_RESULT_BYTES_HARD_CAP",
    "MAX_WORKER_TOOL_CALLS_HARD_CAP",
    "MAX_WORKER_TOOL_CALLS_PER_TURN_HARD_CAP",
    "MAX_WORKER_TURNS_HARD_CAP",
    "MIB",
    "PAGE_LIMIT_DEFAULT",
    "PAGE_LIMIT_HARD_CAP",
    "RECENT_WINDOW_MAX_BYTES",
    "RENDERED_MEMORY_MAX_BYTES",
    "WORKER_LIMIT_DEFAULTS",
    "WORKER_LIMIT_HARD_CAPS",
    "WORKER_LIMIT_SHORT_NAMES",
    "MemoryWorkerLimits",
    "resolve_memory_worker_limits",
    "resolve_page_limit",
    "validate_limit",
]

KIB: Final = 1024
MIB: Final = 1024 * KIB

# The largest integer that a JSON number (an IEEE double) represents exactly; the
# specification's "safe integer".
MAX_SAFE_INTEGER: Final = 2**53 - 1

DEFAULT_MAX_WORKER_TURNS: Final = 16
MAX_WORKER_TURNS_HARD_CAP: Final = 64
DEFAULT_MAX_WORKER_TOOL_CALLS_PER_TURN: Final = 32
MAX_WORKER_TOOL_CALLS_PER_TURN_HARD_CAP: Final = 256
DEFAULT_MAX_WORKER_TOOL_CALLS: Final = 128
MAX_WORKER_TOOL_CALLS_HARD_CAP: Final = 1024
DEFAULT_MAX_WORKER_ARGUMENT_BYTES: Final = 64 * KIB
MAX_WORKER_ARGUMENT_BYTES_HARD_CAP: Final = 1 * MIB
DEFAULT_MAX_WORKER_RESULT_BYTES: Final = 64 * KIB
MAX_WORKER_RESULT_BYTES_HARD_CAP: Final = 1 * MIB
DEFAULT_MAX_WORKER_MESSAGE_BYTES: Final = 1 * MIB
MAX_WORKER_MESSAGE_BYTES_HARD_CAP: Final = 8 * MIB
DEFAULT_MAX_WORKER_ERROR_BYTES: Final = 1 * KIB
MAX_WORKER_ERROR_BYTES_HARD_CAP: Final = 8 * KIB

RENDERED_MEMORY_MAX_BYTES: Final = 256 * KIB
FOLDED_PAYLOAD_MAX_BYTES: Final = 512 * KIB
RECENT_WINDOW_MAX_BYTES: Final = 512 * KIB
PAGE_LIMIT_DEFAULT: Final = 20
PAGE_LIMIT_HARD_CAP: Final = 100

# Store and recall bounds (see the module docstring's second table).
MAX_ENTRY_BYTES: Final = 8 * MIB
MAX_SOURCES_PER_OBSERVATION: Final = 4096
MAX_OBSERVATIONS_PER_REFLECTION: Final = 4096
MAX_SUPERSEDED_PER_REFLECTION: Final = 1024
RECALL_SOURCES_DEFAULT_LIMIT: Final = 100
RECALL_SOURCES_HARD_CAP: Final = 1000

WORKER_LIMIT_DEFAULTS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "max_worker_turns": DEFAULT_MAX_WORKER_TURNS,
        "max_worker_tool_calls_per_turn": DEFAULT_MAX_WORKER_TOOL_CALLS_PER_TURN,
        "max_worker_tool_calls": DEFAULT_MAX_WORKER_TOOL_CALLS,
        "max_worker_argument_bytes": DEFAULT_MAX_WORKER_ARGUMENT_BYTES,
        "max_worker_result_bytes": DEFAULT_MAX_WORKER_RESULT_BYTES,
        "max_worker_message_bytes": DEFAULT_MAX_WORKER_MESSAGE_BYTES,
        "max_worker_error_bytes": DEFAULT_MAX_WORKER_ERROR_BYTES,
    }
)
"""Default of each worker limit, keyed by its runtime (long) name."""

WORKER_LIMIT_HARD_CAPS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "max_worker_turns": MAX_WORKER_TURNS_HARD_CAP,
        "max_worker_tool_calls_per_turn": MAX_WORKER_TOOL_CALLS_PER_TURN_HARD_CAP,
        "max_worker_tool_calls": MAX_WORKER_TOOL_CALLS_HARD_CAP,
        "max_worker_argument_bytes": MAX_WORKER_ARGUMENT_BYTES_HARD_CAP,
        "max_worker_result_bytes": MAX_WORKER_RESULT_BYTES_HARD_CAP,
        "max_worker_message_bytes": MAX_WORKER_MESSAGE_BYTES_HARD_CAP,
        "max_worker_error_bytes": MAX_WORKER_ERROR_BYTES_HARD_CAP,
    }
)
"""Hard cap of each worker limit, keyed by its runtime (long) name."""

WORKER_LIMIT_SHORT_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {long.replace("max_worker_", "max_", 1): long for long in WORKER_LIMIT_DEFAULTS}
)
"""Short name used by direct worker calls (``max_turns``) -> runtime name (``max_worker_turns``)."""

_LONG_TO_SHORT: Final[Mapping[str, str]] = MappingProxyType(
    {long: short for short, long in WORKER_LIMIT_SHORT_NAMES.items()}
)


def validate_limit(name: str, value: object, *, hard_cap: int | None = None) -> int:
    """Return ``value`` when it is a positive safe integer within ``hard_cap``.

    Raises ``InvalidInputError`` for anything that is not an ``int`` (``bool`` included,
    because ``True`` would otherwise pass as ``1``), for ``0`` and negatives and for values
    above ``2**53 - 1``; raises ``LimitExceededError`` above ``hard_cap``. ``name`` is the
    field as the caller spelled it, so the message points at the caller's own argument.
    """
    # Floats are refused outright, integral or not: NaN and infinities are floats too, and a
    # limit that arrives as a float is a caller bug worth surfacing rather than rounding.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(
            f"{name} must be a positive integer, got {shown(value)} ({type(value).__name__})"
        )
    if value <= 0:
        raise InvalidInputError(f"{name} must be a positive integer, got {shown(value)}")
    if value > MAX_SAFE_INTEGER:
        raise InvalidInputError(
            f"{name} must be a safe integer (at most 2**53 - 1 = {MAX_SAFE_INTEGER}), "
            f"got {shown(value)}"
        )
    if hard_cap is not None and value > hard_cap:
        raise LimitExceededError(f"{name} = {value} exceeds its hard cap of {hard_cap}")
    return int(value)


@dataclass(frozen=True, slots=True)
class MemoryWorkerLimits:
    """The resolved limits of one observer, reflector or dropper run.

    Construction validates every field against its hard cap, so an instance is always
    within the specification's bounds.
    """

    max_worker_turns: int = DEFAULT_MAX_WORKER_TURNS
    max_worker_tool_calls_per_turn: int = DEFAULT_MAX_WORKER_TOOL_CALLS_PER_TURN
    max_worker_tool_calls: int = DEFAULT_MAX_WORKER_TOOL_CALLS
    max_worker_argument_bytes: int = DEFAULT_MAX_WORKER_ARGUMENT_BYTES
    max_worker_result_bytes: int = DEFAULT_MAX_WORKER_RESULT_BYTES
    max_worker_message_bytes: int = DEFAULT_MAX_WORKER_MESSAGE_BYTES
    max_worker_error_bytes: int = DEFAULT_MAX_WORKER_ERROR_BYTES

    def __post_init__(self) -> None:
        for name, cap in WORKER_LIMIT_HARD_CAPS.items():
            validate_limit(name, getattr(self, name), hard_cap=cap)

    def as_worker_options(self) -> dict[str, int]:
        """The limits under the short names that direct worker calls take (``max_turns``...)."""
        return {_LONG_TO_SHORT[name]: value for name, value in asdict(self).items()}


def resolve_memory_worker_limits(
    *, agent_max_turns: int | None = None, **limits: int | None
) -> MemoryWorkerLimits:
    """Resolve worker limits from runtime (long) or direct-worker (short) names.

    ``agent_max_turns`` is the settings value; an explicit ``max_worker_turns`` (or
    ``max_turns``) overrides it. A limit passed as ``None`` counts as not given, so callers
    can forward optional keyword arguments unchanged.

    Raises ``InvalidInputError`` for an unknown name or an invalid value,
    ``AmbiguousInputError`` when one limit is given under both its names, and
    ``LimitExceededError`` above a hard cap.
    """
    chosen: dict[str, int] = {}
    given_as: dict[str, str] = {}
    for given, value in limits.items():
        long = WORKER_LIMIT_SHORT_NAMES.get(given, given)
        if long not in WORKER_LIMIT_DEFAULTS:
            known = ", ".join(sorted([*WORKER_LIMIT_DEFAULTS, *WORKER_LIMIT_SHORT_NAMES]))
            raise InvalidInputError(f"unknown worker limit {given!r}; known limits: {known}")
        if value is None:
            continue
        if long in given_as:
            raise AmbiguousInputError(
                f"worker limit given twice: {given_as[long]!r} and {given!r} name the same "
                "limit; pass only one"
            )
        given_as[long] = given
        chosen[long] = validate_limit(given, value, hard_cap=WORKER_LIMIT_HARD_CAPS[long])

    if agent_max_turns is not None:
        # Validated even when max_worker_turns overrides it: a bad setting is still bad.
        turns = validate_limit(
            "agent_max_turns", agent_max_turns, hard_cap=MAX_WORKER_TURNS_HARD_CAP
        )
        chosen.setdefault("max_worker_turns", turns)
    return MemoryWorkerLimits(**chosen)


def resolve_page_limit(
    limit: int | None, default: int = PAGE_LIMIT_DEFAULT, *, name: str = "limit"
) -> int:
    """The page size to use: ``limit``, or ``default`` when it is ``None``.

    Raises ``InvalidInputError`` for a non-integer or non-positive value and
    ``PageTooLargeError`` above the hard cap of 100.
    """
    value: object = default if limit is None else limit
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInputError(
            f"{name} must be a positive integer, got {shown(value)}", field=name
        )
    if value > PAGE_LIMIT_HARD_CAP:
        raise PageTooLargeError(
            f"{name} = {shown(value)} exceeds the page hard cap of {PAGE_LIMIT_HARD_CAP}",
            field=name,
        )
    return value
