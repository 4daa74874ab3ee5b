"""The worker-limit table is importable from ``prism_om`` by its named constants."""

from __future__ import annotations

import prism_om
from prism_om.core import limits

TABLE = {
    # name: (default constant, hard-cap constant, default, hard cap)
    "max_worker_turns": ("DEFAULT_MAX_WORKER_TURNS", "MAX_WORKER_TURNS_HARD_CAP", 16, 64),
    "max_worker_tool_calls_per_turn": (
        "DEFAULT_MAX_WORKER_TOOL_CALLS_PER_TURN",
        "MAX_WORKER_TOOL_CALLS_PER_TURN_HARD_CAP",
        32,
        256,
    ),
    "max_worker_tool_calls": (
        "DEFAULT_MAX_WORKER_TOOL_CALLS",
        "MAX_WORKER_TOOL_CALLS_HARD_CAP",
        128,
        1024,
    ),
    "max_worker_argument_bytes": (
        "DEFAULT_MAX_WORKER_ARGUMENT_BYTES",
        "MAX_WORKER_ARGUMENT_BYTES_HARD_CAP",
        64 * 1024,
        1024 * 1024,
    ),
    "max_worker_result_bytes": (
        "DEFAULT_MAX_WORKER_RESULT_BYTES",
        "MAX_WORKER_RESULT_BYTES_HARD_CAP",
        64 * 1024,
        1024 * 1024,
    ),
    "max_worker_message_bytes": (
        "DEFAULT_MAX_WORKER_MESSAGE_BYTES",
        "MAX_WORKER_MESSAGE_BYTES_HARD_CAP",
        1024 * 1024,
        8 * 1024 * 1024,
    ),
    "max_worker_error_bytes": (
        "DEFAULT_MAX_WORKER_ERROR_BYTES",
        "MAX_WORKER_ERROR_BYTES_HARD_CAP",
        1024,
        8 * 1024,
    ),
}


def test_every_worker_limit_constant_is_a_top_level_name() -> None:
    for runtime_name, (default_name, cap_name, default, cap) in TABLE.items():
        assert default_name in prism_om.__all__ and cap_name in prism_om.__all__
        assert (
            getattr(prism_om, default_name)
            == default
            == prism_om.WORKER_LIMIT_DEFAULTS[runtime_name]
        )
        assert getattr(prism_om, cap_name) == cap == prism_om.WORKER_LIMIT_HARD_CAPS[runtime_name]


def test_the_size_caps_of_the_table_are_top_level_names() -> None:
    from prism_om import (
        FOLDED_PAYLOAD_MAX_BYTES,
        PAGE_LIMIT_DEFAULT,
        PAGE_LIMIT_HARD_CAP,
        RECENT_WINDOW_MAX_BYTES,
        RENDERED_MEMORY_MAX_BYTES,
        MemoryWorkerLimits,
        resolve_memory_worker_limits,
    )

    assert (RENDERED_MEMORY_MAX_BYTES, FOLDED_PAYLOAD_MAX_BYTES, RECENT_WINDOW_MAX_BYTES) == (
        256 * 1024,
        512 * 1024,
        512 * 1024,
    )
    assert (PAGE_LIMIT_DEFAULT, PAGE_LIMIT_HARD_CAP) == (20, 100)
    assert isinstance(resolve_memory_worker_limits(), MemoryWorkerLimits)
    assert prism_om.MAX_WORKER_TURNS_HARD_CAP is limits.MAX_WORKER_TURNS_HARD_CAP
