"""Recall with the same secrets, call after call, builds their redactor once.

Counted, not timed: the secret escapings built (``_representations``, the costly part of
a ``Redactor``). Every answer stays redacted exactly as a freshly built redactor does it,
on every adapter.
"""

from __future__ import annotations

from typing import Any

import pytest

from prism_om.core import redaction
from prism_om.core.redaction import Redactor, redactor
from prism_om.errors import InvalidInputError
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores.base import SessionStore
from prism_om.testing.memory_conformance import load_builder

from .test_recall import SECRET, Story


@pytest.fixture
def escapings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The secrets whose escaped forms are built, one item per build."""
    built: list[str] = []
    real = redaction._representations

    def counted(secret: str) -> set[str]:
        built.append(secret)
        return real(secret)

    monkeypatch.setattr(redaction, "_representations", counted)
    monkeypatch.setattr(redaction, "_recent", {}, raising=False)
    return built


async def test_recalls_with_the_same_secrets_build_them_once(
    store: SessionStore, escapings: list[str]
) -> None:
    story = Story()
    await load_builder(store, story.builder)
    secrets = [SECRET, "hunter2"]
    answers = []
    for memory_id in (story.o1, story.r1, story.o1):
        # A new list each call, as an agent passes its secrets on every tool call.
        answers.append(
            await recall_observational_memory(
                store, memory_id, session_id="s1", secrets=list(secrets)
            )
        )
    await recall_observational_memory_branch_page(
        store, story.m1.id, session_id="s1", secrets=tuple(reversed(secrets))
    )
    assert sorted(escapings) == sorted(secrets)  # once each, not once per call
    fresh = Redactor(secrets)
    listed = recall_observational_memory(story.path, story.o1, secrets=fresh)
    assert answers[0] == answers[2] == listed
    assert SECRET not in str(answers[0].to_json()) and SECRET not in str(answers[1].to_json())


def test_another_set_of_secrets_gets_its_own_redactor(escapings: list[str]) -> None:
    first = redactor(["alpha-secret"])
    assert redactor({"alpha-secret"}) is first
    other = redactor(["alpha-secret", "beta-secret"])
    assert other is not first
    assert other.text("alpha-secret beta-secret") == "[REDACTED] [REDACTED]"
    assert first.text("alpha-secret beta-secret") == "[REDACTED] beta-secret"
    assert escapings == ["alpha-secret", "alpha-secret", "beta-secret"]


def test_kept_redactors_are_bounded(escapings: list[str]) -> None:
    for n in range(redaction._RECENT_MAX + 5):
        redactor([f"secret-{n}"])
    assert len(redaction._recent) == redaction._RECENT_MAX
    redactor(["secret-0"])  # evicted: built again
    assert escapings.count("secret-0") == 2
    recent = f"secret-{redaction._RECENT_MAX + 4}"
    redactor([recent])  # still kept
    assert escapings.count(recent) == 1


@pytest.mark.parametrize("bad", ["one-string", [b"bytes"], [1], [["nested"]]])
def test_bad_secrets_still_refused(bad: Any, escapings: list[str]) -> None:
    with pytest.raises(InvalidInputError):
        redactor(bad)
    assert redaction._recent == {}


def test_an_iterator_is_read_once_and_not_kept(escapings: list[str]) -> None:
    red = redactor(s for s in ["gen-secret"])
    assert red.text("a gen-secret") == "a [REDACTED]"
    assert redaction._recent == {}
