"""Observational memory: records, the ledger fold, projections, rendering and recall.

The functions re-exported here are pure: they take a branch's entries (root first) and
return values, with no I/O, no stores, no settings and no provider calls.
"""

from __future__ import annotations

from .branch_reads import entries_after_cursor, last_eligible_messages, page_around_cursor
from .commands import (
    VIEW_USAGE,
    CommandResult,
    MemoryStatusCommand,
    MemoryViewCommand,
    ObservationalMemoryCommands,
    create_memory_status_command,
    create_memory_view_command,
    create_observational_memory_commands,
)
from .context import (
    MEMORY_BLOCK_NAME,
    RECENT_MESSAGES_BLOCK_NAME,
    ContextBlock,
    build_observational_memory_context_blocks,
)
from .coverage import observations_uncovered_by_reflection, unscanned_entries
from .folded import create_folded_memory_details, folded_payload_bytes, redact_memory_item
from .ledger import (
    Coverage,
    LedgerBuilder,
    ObservationalMemoryLedger,
    RecordedObservation,
    RecordedReflection,
    extend_observational_memory_ledger,
    fold_observational_memory_ledger,
)
from .limits import (
    MAX_ENTRY_BYTES,
    MAX_OBSERVATIONS_PER_REFLECTION,
    MAX_SOURCES_PER_OBSERVATION,
    RECALL_SOURCES_DEFAULT_LIMIT,
    RECALL_SOURCES_HARD_CAP,
    MemoryWorkerLimits,
    resolve_memory_worker_limits,
    resolve_page_limit,
)
from .page import (
    BranchPage,
    recall_observational_memory_branch_page,
    validate_page_request,
)
from .parse import MemoryRecord, folded_memory_of, parse_memory_record
from .projection import (
    ObservationalMemoryProjection,
    active_memory,
    build_observational_memory_projection,
    invalidated_observation_ids,
    is_visible_observation,
)
from .recall import MemoryRecall, check_memory_id, recall_observational_memory
from .recall_tool import (
    RECALL_TOOL_NAME,
    BranchSource,
    RecallMemoryTool,
    create_recall_memory_tool,
)
from .recent import (
    DEFAULT_KEEP_RECENT_ENTRIES,
    RecentMessageWindow,
    recent_message_window,
    render_recent_message_window,
    select_recent_message_entries,
)
from .records import (
    COMPACTION_STRATEGY_NAME,
    FOLDED_TYPE,
    MEMORY_RECORD_TYPES,
    OBSERVATIONS_DROPPED,
    OBSERVATIONS_RECORDED,
    PRIORITY_RANK,
    REFLECTIONS_RECORDED,
    SCOPE_RECORD_TYPES,
    FoldedMemory,
    Observation,
    ObservationsDropped,
    ObservationsRecorded,
    Priority,
    Reflection,
    ReflectionsRecorded,
)
from .redact import REDACTION_MARKER, Redactor, redact_text, redact_value
from .relevance import lowest_relevance_order, observation_pool_tokens, observation_tokens
from .render import (
    RenderedMemory,
    render_observational_memory,
    render_observational_memory_details,
)
from .revocation import (
    TOMBSTONES_RECORDED,
    DeletionPropagator,
    TombstoneSet,
    create_deletion_propagator,
    create_observational_memory_drop_handler,
    list_invalidated_ids,
)
from .scope_controller import (
    WorkScopeController,
    WorkScopeSpec,
    create_work_scope_controller,
    with_work_scope,
)
from .scope_map import (
    MAX_BINDS_PER_SCOPE,
    MAX_PRINCIPALS_PER_SCOPE,
    MAX_SCOPE_DEPTH,
    MAX_SCOPE_STACK,
    MAX_SCOPE_TEXT_CHARS,
    MAX_SCOPES,
    ROOT_SCOPE_ID,
    WorkScope,
    WorkScopeMap,
    fold_work_scope_map,
    is_scope_id,
    memory_ref,
    parse_memory_ref,
)
from .settings import (
    ObservationalMemorySettings,
    reject_removed_settings,
    resolve_observational_memory_settings,
)
from .shared_scopes import (
    ScopeAccessEvent,
    SharedScopeMemory,
    SharedScopes,
    SharedScopeSpec,
    merge_observational_memory_ledgers,
    resolve_shared_scopes,
)
from .sources import eligible_observation_sources, is_eligible_observation_source_entry
from .strategy import (
    DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS,
    ObservationalMemoryCompaction,
    ObservationalMemoryCompactionStrategy,
    create_observational_memory_compaction_strategy,
)
from .validation import (
    BranchFacts,
    IdRequirement,
    MemoryRecordNeeds,
    branch_facts_from_entries,
    memory_record_needs,
    validate_memory_record,
    validate_memory_record_on_branch,
)
from .work_memory import WorkMemoryProjection, project_work_memory, render_scope_outline

__all__ = [
    "MAX_ENTRY_BYTES",
    "MAX_OBSERVATIONS_PER_REFLECTION",
    "MAX_SOURCES_PER_OBSERVATION",
    "RECALL_SOURCES_DEFAULT_LIMIT",
    "RECALL_SOURCES_HARD_CAP",
    "COMPACTION_STRATEGY_NAME",
    "DEFAULT_KEEP_RECENT_ENTRIES",
    "DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS",
    "FOLDED_TYPE",
    "MAX_BINDS_PER_SCOPE",
    "MAX_PRINCIPALS_PER_SCOPE",
    "MAX_SCOPES",
    "MAX_SCOPE_DEPTH",
    "MAX_SCOPE_STACK",
    "MAX_SCOPE_TEXT_CHARS",
    "MEMORY_BLOCK_NAME",
    "MEMORY_RECORD_TYPES",
    "OBSERVATIONS_DROPPED",
    "OBSERVATIONS_RECORDED",
    "PRIORITY_RANK",
    "RECALL_TOOL_NAME",
    "RECENT_MESSAGES_BLOCK_NAME",
    "REDACTION_MARKER",
    "REFLECTIONS_RECORDED",
    "ROOT_SCOPE_ID",
    "SCOPE_RECORD_TYPES",
    "TOMBSTONES_RECORDED",
    "VIEW_USAGE",
    "BranchFacts",
    "BranchPage",
    "BranchSource",
    "CommandResult",
    "ContextBlock",
    "Coverage",
    "DeletionPropagator",
    "FoldedMemory",
    "IdRequirement",
    "LedgerBuilder",
    "MemoryRecall",
    "MemoryRecord",
    "MemoryRecordNeeds",
    "MemoryStatusCommand",
    "MemoryViewCommand",
    "MemoryWorkerLimits",
    "Observation",
    "ObservationalMemoryCommands",
    "ObservationalMemoryCompaction",
    "ObservationalMemoryCompactionStrategy",
    "ObservationalMemoryLedger",
    "ObservationalMemoryProjection",
    "ObservationalMemorySettings",
    "ObservationsDropped",
    "ObservationsRecorded",
    "Priority",
    "RecallMemoryTool",
    "RecentMessageWindow",
    "RecordedObservation",
    "RecordedReflection",
    "Redactor",
    "Reflection",
    "ReflectionsRecorded",
    "RenderedMemory",
    "ScopeAccessEvent",
    "SharedScopeMemory",
    "SharedScopeSpec",
    "SharedScopes",
    "TombstoneSet",
    "WorkMemoryProjection",
    "WorkScope",
    "WorkScopeController",
    "WorkScopeMap",
    "WorkScopeSpec",
    "active_memory",
    "branch_facts_from_entries",
    "build_observational_memory_context_blocks",
    "build_observational_memory_projection",
    "check_memory_id",
    "create_deletion_propagator",
    "create_folded_memory_details",
    "create_memory_status_command",
    "create_memory_view_command",
    "create_observational_memory_commands",
    "create_observational_memory_compaction_strategy",
    "create_observational_memory_drop_handler",
    "create_recall_memory_tool",
    "create_work_scope_controller",
    "eligible_observation_sources",
    "entries_after_cursor",
    "extend_observational_memory_ledger",
    "fold_observational_memory_ledger",
    "fold_work_scope_map",
    "folded_memory_of",
    "folded_payload_bytes",
    "invalidated_observation_ids",
    "is_eligible_observation_source_entry",
    "is_scope_id",
    "is_visible_observation",
    "last_eligible_messages",
    "list_invalidated_ids",
    "lowest_relevance_order",
    "memory_record_needs",
    "memory_ref",
    "merge_observational_memory_ledgers",
    "observation_pool_tokens",
    "observation_tokens",
    "observations_uncovered_by_reflection",
    "page_around_cursor",
    "parse_memory_record",
    "parse_memory_ref",
    "project_work_memory",
    "recall_observational_memory",
    "recall_observational_memory_branch_page",
    "recent_message_window",
    "redact_memory_item",
    "redact_text",
    "redact_value",
    "reject_removed_settings",
    "render_observational_memory",
    "render_observational_memory_details",
    "render_recent_message_window",
    "render_scope_outline",
    "resolve_memory_worker_limits",
    "resolve_observational_memory_settings",
    "resolve_page_limit",
    "resolve_shared_scopes",
    "select_recent_message_entries",
    "unscanned_entries",
    "validate_memory_record",
    "validate_memory_record_on_branch",
    "validate_page_request",
    "with_work_scope",
]

# Read-path withholding: one invalidation set, withheld alike by every read path.
from .revocation import list_store_invalidated_ids, list_tombstone_scopes
from .shared_scopes import SHARED_BLOCK_NAME, shared_scope_block
from .withheld import (
    REVOKED_MARKER,
    InvalidationSource,
    resolve_invalidation,
    withheld_memory_ids,
    withheld_page_message,
)

__all__ += [
    "REVOKED_MARKER",
    "SHARED_BLOCK_NAME",
    "InvalidationSource",
    "list_store_invalidated_ids",
    "list_tombstone_scopes",
    "resolve_invalidation",
    "shared_scope_block",
    "withheld_memory_ids",
    "withheld_page_message",
]
