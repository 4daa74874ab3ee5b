"""The public names: every one in ``__all__`` imports, and importing starts nothing."""

from __future__ import annotations

import subprocess
import sys

import prism_om
import prism_om.observational_memory as om

SPEC_EXPORTS = [
    "fold_observational_memory_ledger",
    "fold_work_scope_map",
    "create_work_scope_controller",
    "project_work_memory",
    "with_work_scope",
    "is_eligible_observation_source_entry",
    "eligible_observation_sources",
    "unscanned_entries",
    "observations_uncovered_by_reflection",
    "build_observational_memory_projection",
    "build_observational_memory_context_blocks",
    "select_recent_message_entries",
    "render_recent_message_window",
    "create_folded_memory_details",
    "render_observational_memory",
    "recall_observational_memory",
    "list_invalidated_ids",
    "create_observational_memory_drop_handler",
    "recall_observational_memory_branch_page",
    "create_memory_id",
    "is_memory_id",
    "resolve_observational_memory_settings",
    "create_observational_memory",
    "create_observational_memory_runtime",
    "create_observational_memory_compaction_strategy",
    "create_observational_memory_extension",
    "create_recall_memory_tool",
    "create_search_memory_tool",
    "search_observational_memory",
    "create_memory_status_command",
    "create_memory_view_command",
    "create_observational_memory_commands",
    "resolve_memory_worker_limits",
    "merge_observational_memory_ledgers",
    "resolve_shared_scopes",
]


def test_every_name_in_all_is_importable_and_unique() -> None:
    for module in (prism_om, om):
        assert len(module.__all__) == len(set(module.__all__))
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_the_specification_exports_are_all_there() -> None:
    missing = [name for name in SPEC_EXPORTS if name not in prism_om.__all__]
    assert missing == []


def test_import_needs_no_optional_dependency_and_starts_nothing() -> None:
    code = (
        "import sys, threading, asyncio\n"
        "sys.modules['httpx'] = None\n"
        "before = threading.active_count()\n"
        "import prism_om\n"
        "assert threading.active_count() == before, 'a thread started on import'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_package_exports_types_stores_errors_and_limits_by_name() -> None:
    import prism_om.errors

    wanted = {
        "Session",
        "SessionSummary",
        "SessionEntry",
        "SessionStore",
        "MemoryStore",
        "open_store",
        "create_observational_memory",
        "MAX_ENTRY_BYTES",
        "MAX_SOURCES_PER_OBSERVATION",
        "MAX_OBSERVATIONS_PER_REFLECTION",
        "RECALL_SOURCES_DEFAULT_LIMIT",
        "RECALL_SOURCES_HARD_CAP",
        "WORKER_LIMIT_DEFAULTS",
        "WORKER_LIMIT_HARD_CAPS",
        "DebugSink",
        *prism_om.errors.__all__,
    }
    assert sorted(wanted - set(prism_om.__all__)) == []


def test_the_services_export_no_internal_dispatch_type() -> None:
    # BranchSource is how the recall tool and the commands reach a branch: internal.
    assert "BranchSource" not in om.__all__
