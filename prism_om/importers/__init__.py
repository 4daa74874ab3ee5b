"""Importing transcripts from other tools into a store, as new sessions.

Three formats: OpenAI-style chat messages (``openai``), pi coding agent session files
(``pi``) and this package's own JSONL session files (``native``). ``parse_conversation``
turns a file into an ``ImportPlan`` without touching a store; ``import_conversation``
appends the plan to a store in one all-or-nothing batch. Each format module's docstring has
its mapping table; ``build`` explains ids, ``times`` timestamps, ``api`` session naming.
"""

from __future__ import annotations

from .api import (
    ImportPlan,
    ImportResult,
    default_session_id,
    import_conversation,
    parse_conversation,
    parse_conversation_bytes,
)
from .build import Progress, derive_entry_id
from .detect import FORMATS, Format, detect_format
from .errors import ImportFormatError, ImportTimeError, SessionExistsError
from .source import read_source
from .times import DEFAULT_INTERVAL, ImportTimes, TimeFallback

__all__ = [
    "DEFAULT_INTERVAL",
    "FORMATS",
    "Format",
    "ImportFormatError",
    "ImportPlan",
    "ImportResult",
    "ImportTimeError",
    "ImportTimes",
    "TimeFallback",
    "Progress",
    "SessionExistsError",
    "default_session_id",
    "derive_entry_id",
    "detect_format",
    "import_conversation",
    "parse_conversation",
    "parse_conversation_bytes",
    "read_source",
]
