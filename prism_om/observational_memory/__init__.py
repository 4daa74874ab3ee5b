"""Observational memory services: what hosts call over a branch's entries or a store.

Each function that accepts either a branch's entries (root first) or a ``SessionStore``
is a facade defined in :mod:`._source`: entries give a pure, synchronous result computed
by :mod:`prism_om.core`; a store with ``session_id`` gives an awaitable that reads only
what it needs. Above the facades sit the recall tool, the commands, the compaction
strategy, work scopes, shared scopes, revocation and settings. The pure records, folds
and renderers they use live in :mod:`prism_om.core`.
"""

from __future__ import annotations

from ._source import (
    build_observational_memory_context_blocks,
    build_observational_memory_projection,
    fold_observational_memory_ledger,
    observations_uncovered_by_reflection,
    recall_observational_memory,
    recall_observational_memory_branch_page,
    render_recent_message_window,
    select_recent_message_entries,
    unscanned_entries,
)
from .commands import (
    CommandResult,
    MemoryStatusCommand,
    MemoryViewCommand,
    ObservationalMemoryCommands,
    create_memory_status_command,
    create_memory_view_command,
    create_observational_memory_commands,
)
from .folded import create_folded_memory_details
from .recall_tool import RECALL_TOOL_NAME, RecallMemoryTool, create_recall_memory_tool
from .revocation import (
    TOMBSTONES_RECORDED,
    DeletionPropagator,
    TombstoneSet,
    create_deletion_propagator,
    create_observational_memory_drop_handler,
    list_invalidated_ids,
    list_store_invalidated_ids,
    list_tombstone_scopes,
)
from .scope_controller import (
    WorkScopeController,
    WorkScopeSpec,
    create_work_scope_controller,
    with_work_scope,
)
from .search import (
    SEARCH_TOOL_NAME,
    SearchMemoryTool,
    SearchResults,
    create_search_memory_tool,
    search_observational_memory,
)
from .settings import ObservationalMemorySettings, resolve_observational_memory_settings
from .shared_scopes import (
    SHARED_BLOCK_NAME,
    ScopeAccessEvent,
    SharedScopeMemory,
    SharedScopes,
    SharedScopeSpec,
    merge_observational_memory_ledgers,
    resolve_shared_scopes,
    shared_scope_block,
)
from .strategy import (
    ObservationalMemoryCompaction,
    ObservationalMemoryCompactionStrategy,
    create_observational_memory_compaction_strategy,
)
from .withholding import active_store_memory, withholding_ledger

__all__ = [
    "RECALL_TOOL_NAME",
    "SEARCH_TOOL_NAME",
    "SHARED_BLOCK_NAME",
    "TOMBSTONES_RECORDED",
    "CommandResult",
    "DeletionPropagator",
    "MemoryStatusCommand",
    "MemoryViewCommand",
    "ObservationalMemoryCommands",
    "ObservationalMemoryCompaction",
    "ObservationalMemoryCompactionStrategy",
    "ObservationalMemorySettings",
    "RecallMemoryTool",
    "SearchMemoryTool",
    "SearchResults",
    "ScopeAccessEvent",
    "SharedScopeMemory",
    "SharedScopeSpec",
    "SharedScopes",
    "TombstoneSet",
    "WorkScopeController",
    "WorkScopeSpec",
    "active_store_memory",
    "build_observational_memory_context_blocks",
    "build_observational_memory_projection",
    "create_deletion_propagator",
    "create_folded_memory_details",
    "create_memory_status_command",
    "create_memory_view_command",
    "create_observational_memory_commands",
    "create_observational_memory_compaction_strategy",
    "create_observational_memory_drop_handler",
    "create_recall_memory_tool",
    "create_search_memory_tool",
    "create_work_scope_controller",
    "fold_observational_memory_ledger",
    "list_invalidated_ids",
    "list_store_invalidated_ids",
    "list_tombstone_scopes",
    "merge_observational_memory_ledgers",
    "observations_uncovered_by_reflection",
    "recall_observational_memory",
    "recall_observational_memory_branch_page",
    "search_observational_memory",
    "render_recent_message_window",
    "resolve_observational_memory_settings",
    "resolve_shared_scopes",
    "select_recent_message_entries",
    "shared_scope_block",
    "unscanned_entries",
    "with_work_scope",
    "withholding_ledger",
]
