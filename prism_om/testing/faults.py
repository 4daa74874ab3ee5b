"""Fault injection at a store's append commit point, for crash and rollback tests.

Every adapter calls one documented point inside its append (``StoreLifecycle``'s
``_append_fault_point``), after every rule check and before the batch becomes
visible: SQLite inside its ``BEGIN IMMEDIATE`` transaction after the rows are written,
JSONL between writing the data and replacing the sidecar that commits it, the in-memory
store before it applies the batch. A fault that raises leaves the store exactly as it
was and its exception reaches the caller; a fault that kills the process (``os._exit``)
leaves no part of the batch for the next open to see. With no fault installed the point
costs one attribute read per batch.

    with inject_append_fault(store, fail_on("e7")):
        await store.append_many(batch)  # raises InjectedFault, stores nothing
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from ..entries import SessionEntry
from ..stores.base import AppendFault, StoreLifecycle

__all__ = ["AppendFault", "InjectedFault", "fail_on", "inject_append_fault"]


class InjectedFault(Exception):
    """What ``fail_on`` raises: no prism_om error, so a test sees it is not the store's."""


def fail_on(entry_id: str) -> AppendFault:
    """A fault that raises ``InjectedFault`` for any batch holding ``entry_id``."""

    def fault(batch: Sequence[SessionEntry]) -> None:
        if any(entry.id == entry_id for entry in batch):
            raise InjectedFault(f"injected fault at entry {entry_id!r}")

    return fault


@contextmanager
def inject_append_fault(
    store: object, fault: Callable[[Sequence[SessionEntry]], None]
) -> Iterator[None]:
    """Run ``fault(batch)`` at ``store``'s append commit point while the block runs.

    ``batch`` holds the entries as they will be stored (``append_at_leaf`` batches with
    their resolved parents). ``TypeError`` for a store that has no fault point (one not
    built on ``StoreLifecycle``); faults do not nest on one store.
    """
    if not isinstance(store, StoreLifecycle):
        raise TypeError(
            f"{type(store).__name__} has no append fault point: an adapter gets one from "
            "prism_om.stores.base.StoreLifecycle (or StoreBase)"
        )
    if store._append_fault is not None:
        raise RuntimeError(f"store {store.url!r} already has an append fault installed")
    store._append_fault = fault
    try:
        yield
    finally:
        # The class default (None) shows again, so the hot path reads one attribute.
        del store._append_fault
