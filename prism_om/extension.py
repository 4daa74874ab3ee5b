"""The inert extension helper: contributions a host registers, nothing that runs.

``create_observational_memory_extension()`` returns an extension whose ``setup(host)``
registers the compaction strategy and, when asked, the ``recall`` tool and the
``om:status`` / ``om:view`` commands. Setup starts no worker, compacts nothing, reads no
settings, resolves no credential, calls no provider and executes no tool or command: the
tool and commands are built from factories the host's own calls will later invoke.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .observational_memory.commands import create_observational_memory_commands
from .observational_memory.recall_tool import create_recall_memory_tool
from .observational_memory.strategy import create_observational_memory_compaction_strategy

__all__ = [
    "ExtensionHost",
    "ObservationalMemoryExtension",
    "create_observational_memory_extension",
]

EXTENSION_NAME = "observational-memory"


class ExtensionHost(Protocol):
    """What an extension may call during setup: registration only."""

    def register_compaction_strategy(self, name: str, strategy: Any) -> None: ...

    def register_tool(self, tool: Any) -> None: ...

    def register_command(self, command: Any) -> None: ...


@dataclass(frozen=True)
class ObservationalMemoryExtension:
    """An inert bundle of contributions; ``setup`` only registers them."""

    name: str = EXTENSION_NAME
    disabled: bool = False
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    recall_tool: Mapping[str, Any] | None = None
    commands: Mapping[str, Any] | None = None

    def setup(self, host: ExtensionHost) -> None:
        if self.disabled:
            return
        strategy = create_observational_memory_compaction_strategy(**self.strategy_options)
        host.register_compaction_strategy(strategy.name, strategy)
        if self.recall_tool is not None:
            host.register_tool(create_recall_memory_tool(**self.recall_tool))
        if self.commands is not None:
            for command in create_observational_memory_commands(**self.commands):
                host.register_command(command)


def create_observational_memory_extension(
    *,
    recall_tool: Mapping[str, Any] | None = None,
    commands: Mapping[str, Any] | None = None,
    strategy: Mapping[str, Any] | None = None,
    disabled: bool = False,
) -> ObservationalMemoryExtension:
    """An extension registering the strategy, and the recall tool / commands when given
    their options (``{"store": store}`` or ``{"get_entries": fn}``, plus ``secrets``)."""
    return ObservationalMemoryExtension(
        disabled=disabled,
        strategy_options=dict(strategy or {}),
        recall_tool=None if recall_tool is None else dict(recall_tool),
        commands=None if commands is None else dict(commands),
    )
