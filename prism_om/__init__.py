"""prism_om: durable, source-backed observational memory for long agent sessions.

The whole transcript lives as an append-only tree of entries in a store (SQLite by
default; JSONL and in-memory too); observer, reflector and dropper workers keep short,
dated observations and reflections over it, each pointing at the exact entries it came
from. Start with ``open_store``, ``Session``, ``Agent`` and
``create_observational_memory(...).attach(agent)``.
"""

from __future__ import annotations

from . import observational_memory as _om
from .attach import (
    AttachedObservationalMemory,
    CompactionContext,
    ObservationalMemory,
    create_observational_memory,
)
from .entries import (
    Message,
    SessionEntry,
    ToolCall,
    compaction_entry,
    custom_entry,
    entry_from_wire,
    message_entry,
)
from .extension import create_observational_memory_extension
from .funnel import funnel_child_messages_to_workspace
from .host import Agent, AgentTool, CompactionRequest
from .ids import create_entry_id, create_memory_id, is_memory_id
from .observational_memory import *  # noqa: F403 - the memory API, re-exported whole

# The specification's worker-limit table: each default and hard cap by its named constant.
from .observational_memory.limits import (
    DEFAULT_MAX_WORKER_ARGUMENT_BYTES,
    DEFAULT_MAX_WORKER_ERROR_BYTES,
    DEFAULT_MAX_WORKER_MESSAGE_BYTES,
    DEFAULT_MAX_WORKER_RESULT_BYTES,
    DEFAULT_MAX_WORKER_TOOL_CALLS,
    DEFAULT_MAX_WORKER_TOOL_CALLS_PER_TURN,
    DEFAULT_MAX_WORKER_TURNS,
    FOLDED_PAYLOAD_MAX_BYTES,
    MAX_WORKER_ARGUMENT_BYTES_HARD_CAP,
    MAX_WORKER_ERROR_BYTES_HARD_CAP,
    MAX_WORKER_MESSAGE_BYTES_HARD_CAP,
    MAX_WORKER_RESULT_BYTES_HARD_CAP,
    MAX_WORKER_TOOL_CALLS_HARD_CAP,
    MAX_WORKER_TOOL_CALLS_PER_TURN_HARD_CAP,
    MAX_WORKER_TURNS_HARD_CAP,
    PAGE_LIMIT_DEFAULT,
    PAGE_LIMIT_HARD_CAP,
    RECENT_WINDOW_MAX_BYTES,
    RENDERED_MEMORY_MAX_BYTES,
    WORKER_LIMIT_DEFAULTS,
    WORKER_LIMIT_HARD_CAPS,
)
from .providers import Provider, ProviderRequest, ScriptedProvider
from .session import Session
from .stores import SessionStore, open_store
from .tokens import estimate_entry_tokens, estimate_message_tokens, get_estimator
from .workers import (
    Model,
    OfflineMemoryProvider,
    create_observational_memory_runtime,
    resolve_input_cap,
    run_dropper,
    run_observer,
    run_reflector,
)

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentTool",
    "AttachedObservationalMemory",
    "CompactionContext",
    "CompactionRequest",
    "Message",
    "Model",
    "ObservationalMemory",
    "OfflineMemoryProvider",
    "Provider",
    "ProviderRequest",
    "ScriptedProvider",
    "Session",
    "SessionEntry",
    "SessionStore",
    "ToolCall",
    "compaction_entry",
    "create_entry_id",
    "create_memory_id",
    "create_observational_memory",
    "create_observational_memory_extension",
    "create_observational_memory_runtime",
    "custom_entry",
    "entry_from_wire",
    "estimate_entry_tokens",
    "estimate_message_tokens",
    "funnel_child_messages_to_workspace",
    "get_estimator",
    "is_memory_id",
    "message_entry",
    "open_store",
    "resolve_input_cap",
    "run_dropper",
    "run_observer",
    "run_reflector",
    # and every name of prism_om.observational_memory:
    *_om.__all__,
    # the worker-limit table:
    "DEFAULT_MAX_WORKER_ARGUMENT_BYTES",
    "DEFAULT_MAX_WORKER_ERROR_BYTES",
    "DEFAULT_MAX_WORKER_MESSAGE_BYTES",
    "DEFAULT_MAX_WORKER_RESULT_BYTES",
    "DEFAULT_MAX_WORKER_TOOL_CALLS",
    "DEFAULT_MAX_WORKER_TOOL_CALLS_PER_TURN",
    "DEFAULT_MAX_WORKER_TURNS",
    "FOLDED_PAYLOAD_MAX_BYTES",
    "MAX_WORKER_ARGUMENT_BYTES_HARD_CAP",
    "MAX_WORKER_ERROR_BYTES_HARD_CAP",
    "MAX_WORKER_MESSAGE_BYTES_HARD_CAP",
    "MAX_WORKER_RESULT_BYTES_HARD_CAP",
    "MAX_WORKER_TOOL_CALLS_HARD_CAP",
    "MAX_WORKER_TOOL_CALLS_PER_TURN_HARD_CAP",
    "MAX_WORKER_TURNS_HARD_CAP",
    "PAGE_LIMIT_DEFAULT",
    "PAGE_LIMIT_HARD_CAP",
    "RECENT_WINDOW_MAX_BYTES",
    "RENDERED_MEMORY_MAX_BYTES",
    "WORKER_LIMIT_DEFAULTS",
    "WORKER_LIMIT_HARD_CAPS",
]
