"""A throwaway PostgreSQL cluster for the test session, or the server a variable names.

``PRISM_TEST_POSTGRES_URL`` (a ``postgresql://`` URL) is used when set. Otherwise
``prism_om.testing.postgres_cluster`` starts one cluster (its docstring says how).
Where neither is possible the PostgreSQL tests skip with the reason, unless
``PRISM_REQUIRE_POSTGRES=1`` (``.ci/run`` sets it), which turns the skip into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from prism_om.testing import postgres_cluster
from prism_om.testing.postgres_cluster import (
    drop_schema,
    find_bindir,
    restart_cluster,
    with_fresh_schema,
)

__all__ = [
    "REQUIRE_VARIABLE",
    "URL_VARIABLE",
    "drop_schema",
    "find_bindir",
    "restart_cluster",
    "throwaway_cluster",
    "unavailable",
    "with_fresh_schema",
]

URL_VARIABLE = "PRISM_TEST_POSTGRES_URL"
REQUIRE_VARIABLE = "PRISM_REQUIRE_POSTGRES"


def unavailable(reason: str) -> None:
    """Skip the test, or fail it where CI requires PostgreSQL."""
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but PostgreSQL tests cannot run: {reason}")
    pytest.skip(reason)


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    """Start a cluster, yield its base URL, stop and remove it; skip (or fail) if impossible."""
    with ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_cluster.throwaway_cluster())
        except postgres_cluster.PostgresUnavailableError as exc:
            unavailable(str(exc))
            raise AssertionError("unreachable") from exc
        yield url
