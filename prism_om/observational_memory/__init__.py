"""Observational memory: records, the ledger fold, projections, rendering and recall.

The functions re-exported here are pure: they take a branch's entries (root first) and
return values, with no I/O, no stores, no settings and no provider calls.
"""

from __future__ import annotations

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
from .parse import MemoryRecord, folded_memory_of, parse_memory_record
from .projection import (
    ObservationalMemoryProjection,
    active_memory,
    build_observational_memory_projection,
    invalidated_observation_ids,
    is_visible_observation,
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

__all__ = [
    "COMPACTION_STRATEGY_NAME",
    "DEFAULT_KEEP_RECENT_ENTRIES",
    "DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS",
    "FOLDED_TYPE",
    "MEMORY_BLOCK_NAME",
    "MEMORY_RECORD_TYPES",
    "OBSERVATIONS_DROPPED",
    "OBSERVATIONS_RECORDED",
    "PRIORITY_RANK",
    "RECENT_MESSAGES_BLOCK_NAME",
    "REDACTION_MARKER",
    "REFLECTIONS_RECORDED",
    "SCOPE_RECORD_TYPES",
    "BranchFacts",
    "ContextBlock",
    "Coverage",
    "FoldedMemory",
    "IdRequirement",
    "LedgerBuilder",
    "MemoryRecord",
    "MemoryRecordNeeds",
    "Observation",
    "ObservationalMemoryCompaction",
    "ObservationalMemoryCompactionStrategy",
    "ObservationalMemoryLedger",
    "ObservationalMemoryProjection",
    "ObservationsDropped",
    "ObservationsRecorded",
    "Priority",
    "RecentMessageWindow",
    "RecordedObservation",
    "RecordedReflection",
    "Redactor",
    "Reflection",
    "ReflectionsRecorded",
    "RenderedMemory",
    "active_memory",
    "branch_facts_from_entries",
    "build_observational_memory_context_blocks",
    "build_observational_memory_projection",
    "create_folded_memory_details",
    "create_observational_memory_compaction_strategy",
    "eligible_observation_sources",
    "extend_observational_memory_ledger",
    "fold_observational_memory_ledger",
    "folded_memory_of",
    "folded_payload_bytes",
    "invalidated_observation_ids",
    "is_eligible_observation_source_entry",
    "is_visible_observation",
    "lowest_relevance_order",
    "memory_record_needs",
    "observation_pool_tokens",
    "observation_tokens",
    "observations_uncovered_by_reflection",
    "parse_memory_record",
    "recent_message_window",
    "redact_memory_item",
    "redact_text",
    "redact_value",
    "render_observational_memory",
    "render_observational_memory_details",
    "render_recent_message_window",
    "select_recent_message_entries",
    "unscanned_entries",
    "validate_memory_record",
    "validate_memory_record_on_branch",
]
