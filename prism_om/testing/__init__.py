"""Test support that ships with the package, so outside adapters can run our suites.

The kit needs pytest, pytest-asyncio and hypothesis, which are not dependencies of prism-om;
install them with the ``testing`` extra::

    pip install 'prism-om[testing]'

Without it, importing a kit module that needs them raises ``ImportError`` naming the extra.
``import prism_om`` itself never imports them.

Modules:

- ``conformance``: ``StoreConformance``, every rule of ``SessionStore`` (round trips,
  branches, leaves, write concurrency and cancellation, size bounds, ``delete_session``
  from ``delete_conformance``, bad arguments and unstorable entries from
  ``conformance_inputs``), and ``StoreOpener``.
- ``memory_conformance``: ``MemoryConformance``, the memory and branch reads of a store
  compared with the pure folds over its entries, and (from ``search_conformance``)
  ``SearchConformance``: ``search`` equal to the in-memory store's, hit for hit, and its
  safety rules (isolation, revocation, secrets, inactive memory, erasure, bad input).
- ``tree_only`` and ``dict_store``: two example adapters that implement only the tree
  operations of ``StoreBase`` (one over a wrapped ``MemoryStore``, one over plain dicts
  whose writes never yield), proving its derived reads satisfy both suites.
- ``faults``: ``inject_append_fault``, a fault at an adapter's append commit point.
- ``generate`` and ``om_factories``: random operations, messages and observational-memory
  branches (hypothesis strategies) for property tests.

To run the conformance suite against your own adapter, subclass it in a test module and
give it a ``store_opener`` fixture (the suite's tests are ``async``, so set
``asyncio_mode = "auto"`` for pytest-asyncio)::

    import pytest
    from prism_om.stores import SessionStore
    from prism_om.testing.conformance import StoreConformance, StoreOpener

    from my_adapter import MyStore

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_opener(self, tmp_path) -> StoreOpener:
            async def open_store() -> SessionStore:
                return await MyStore.open(tmp_path / "data")

            # persistent=True: each open() sees what earlier opens wrote.
            return StoreOpener(open_store, persistent=True)
"""
