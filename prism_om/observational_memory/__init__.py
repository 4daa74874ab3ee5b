"""Observational memory: records, the ledger fold, projections, rendering and recall."""
