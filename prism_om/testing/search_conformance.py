"""Search conformance: every adapter's ``search`` equals the in-memory reference, and keeps
the safety rules that a naive index would break.

For generated forked sessions (messages, observations, reflections, supersessions, drops,
secrets sprinkled into the text), each adapter must return exactly the hits, in exactly the
order, that ``MemoryStore`` returns for the same entries, on every leaf, for every kind,
with and without inactive memory, revocation and secrets. Then each rule on its own, on
small hand-built sessions: no hit from another session or another branch; a revoked
message, an observation resting on it and a reflection over that observation never match
(even once the observation is dropped); a query term of a secret is dropped and every
snippet redacted, so a query cannot confirm a secret; dropped and superseded memory only
with ``include_inactive``, marked; a deleted session's index is gone; every bad argument
is a typed error, and engine query syntax in the text is just text.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..core.redaction import REDACTION_MARKER
from ..entries import SessionEntry
from ..errors import (
    EntryNotFoundError,
    InvalidInputError,
    LimitExceededError,
    PageTooLargeError,
    SessionMismatchError,
)
from ..stores.base import SessionStore
from ..stores.memory import MemoryStore
from ..stores.search import (
    SEARCH_CANDIDATES_PER_TERM,
    SEARCH_KINDS,
    SEARCH_QUERY_MAX_CHARS,
    SearchHit,
)
from ._requires import pytest
from .conformance import StoreOpener
from .om_factories import _WORDS, SUPERSESSION_OPERATIONS, BranchBuilder, random_builder

__all__ = ["SearchConformance"]

SECRET = "sk-live-4f9a2c"


async def _load(store: SessionStore, entries: Sequence[SessionEntry], leaf: str | None) -> None:
    for start in range(0, len(entries), 9):
        await store.append_many(entries[start : start + 9])
    if leaf is not None and entries:
        await store.checkout(entries[0].session_id, leaf)


def _ids(hits: Sequence[SearchHit]) -> list[str]:
    return [h.id for h in hits]


class SearchConformance:
    """``search`` of the store under test against ``MemoryStore``, and its safety rules."""

    @pytest.fixture
    async def store(self, store_opener: StoreOpener) -> AsyncIterator[SessionStore]:
        opened = await store_opener.open()
        yield opened
        await opened.close()

    @pytest.mark.parametrize("seed", range(4))
    async def test_search_equals_the_reference_on_every_branch(
        self, store: SessionStore, seed: int
    ) -> None:
        builder = random_builder(
            seed,
            steps=120,
            session_id=f"sr{seed}",
            secrets=[SECRET],
            operations=SUPERSESSION_OPERATIONS,
        )
        other = random_builder(seed + 100, steps=40, session_id=f"sx{seed}")
        leaf = builder.path[-1].id
        reference = MemoryStore()
        for target in (store, reference):
            await _load(target, other.entries, other.path[-1].id)
            await _load(target, builder.entries, leaf)
        sid = builder.session_id
        rng = random.Random(seed)
        ledger = await reference.ledger(sid)
        messages = [e.id for e in builder.entries if e.kind == "message"]
        revoked = rng.sample(messages, k=min(3, len(messages)))
        revoked += [o.id for o in ledger.observations[:1]]
        queries = [" ".join(rng.sample(_WORDS, k)) for k in (1, 1, 2, 3, 5) for _ in range(2)]
        queries += [f"{SECRET} billing", "the and of", "Billing, POSTGRES!"]
        other_ids = {e.id for e in other.entries}
        other_ledger = await reference.ledger(other.session_id)
        other_ids |= {o.id for o in other_ledger.observations}
        other_ids |= {r.id for r in other_ledger.reflections}
        seen = 0
        for at in [None, *(await reference.leaves(sid))[:4]]:
            for n, query in enumerate(queries):
                options: dict[str, Any] = {
                    "limit": (100, 5, 1)[n % 3],
                    "include_inactive": n % 2 == 1,
                    "kinds": None if n % 4 else [SEARCH_KINDS[n // 4 % 3]],
                }
                if n % 3 == 0:
                    options["invalidated_ids"] = revoked
                if n % 5 != 4:
                    options["secrets"] = [SECRET]
                expected = await reference.search(sid, query, leaf_id=at, **options)
                got = await store.search(sid, query, leaf_id=at, **options)
                assert got == expected, (at, query, options)
                assert not {h.id for h in got} & other_ids, "a hit from another session"
                if "secrets" in options:
                    assert SECRET not in repr(got)
                seen += len(got)
        assert seen > 100, "the generated sessions gave too few hits to compare"

    async def test_no_hit_from_another_session_or_another_branch(self, store: SessionStore) -> None:
        a = BranchBuilder(session_id="iso-a", rng=random.Random(1))
        first = a.message("user", "the invoice export for tenant acme failed")
        a.message("assistant", "retrying the invoice export")
        a.checkout(first.id)
        off_branch = a.message("assistant", "invoice export done on the other branch")
        b = BranchBuilder(session_id="iso-b", rng=random.Random(2))
        b.message("user", "invoice export for tenant globex")
        await _load(store, b.entries, None)
        await _load(store, a.entries, None)
        main_leaf = a.entries[1].id
        await store.checkout("iso-a", main_leaf)
        hits = await store.search("iso-a", "invoice export")
        assert set(_ids(hits)) == {main_leaf, first.id}
        assert off_branch.id not in _ids(hits)
        on_fork = await store.search("iso-a", "invoice export", leaf_id=off_branch.id)
        assert set(_ids(on_fork)) == {first.id, off_branch.id}
        assert _ids(await store.search("iso-b", "invoice")) == [b.entries[0].id]
        with pytest.raises(SessionMismatchError):
            await store.search("iso-b", "invoice", leaf_id=main_leaf)
        with pytest.raises(EntryNotFoundError):
            await store.search("iso-a", "invoice", leaf_id="no-such-entry")
        assert await store.search("nobody", "invoice") == []

    async def test_revoked_content_never_matches(self, store: SessionStore) -> None:
        b = BranchBuilder(session_id="rev", rng=random.Random(3))
        secret = b.message("user", "my passport number is in the lisbon drawer")
        kept = b.message("user", "the billing export runs on friday, not lisbon")
        b.observe(1, sources=[secret.id], text="passport kept in the lisbon drawer")
        ob_secret = b.model.observations[-1].id
        b.observe(1, sources=[kept.id], text="billing export runs friday")
        ob_kept = b.model.observations[-1].id
        reflection = _reflection(b, [ob_secret], "the user keeps a passport in lisbon")
        b.drop([ob_secret])  # the revocation's drop handler
        await _load(store, b.entries, None)
        revoked = [secret.id]
        for inactive in (False, True):
            hits = await store.search(
                "rev", "lisbon passport", invalidated_ids=revoked, include_inactive=inactive
            )
            assert _ids(hits) == [kept.id], "only the message that does not rest on it"
            assert "passport" not in repr(hits)
        # Without the revocation all three match (the observation only as dropped).
        open_hits = await store.search("rev", "lisbon passport", include_inactive=True)
        assert set(_ids(open_hits)) == {reflection, ob_secret, secret.id, kept.id}
        assert {h.id: h.status for h in open_hits}[ob_secret] == "dropped"
        assert _ids(await store.search("rev", "billing", invalidated_ids=revoked)) == [
            ob_kept,
            kept.id,
        ]

    async def test_a_query_cannot_confirm_a_secret(self, store: SessionStore) -> None:
        b = BranchBuilder(session_id="sec", rng=random.Random(4))
        b.message("user", f"the deploy token is {SECRET} keep it safe")
        plain = b.message("user", "the deploy went fine")
        only_secret = b.message("assistant", f"{SECRET}")
        b.observe(1, sources=[only_secret.id], text=f"deploy uses token {SECRET}")
        await _load(store, b.entries, None)
        secrets = [SECRET]
        for query in (SECRET, "4f9a2c", "sk live 4f9a2c", "live"):
            assert await store.search("sec", query, secrets=secrets) == []
            assert await store.search("sec", query, secrets=secrets, include_inactive=True) == []
        hits = await store.search("sec", "deploy token", secrets=secrets)
        assert len(hits) == 3 and plain.id in _ids(hits)
        assert only_secret.id not in _ids(hits), "its one match is inside the secret"
        assert SECRET not in repr(hits) and any(REDACTION_MARKER in h.text for h in hits)
        # Without the secret configured, the same store finds it: the rule did the work.
        assert only_secret.id in _ids(await store.search("sec", "4f9a2c"))

    async def test_a_guess_of_a_word_a_secret_hides_finds_what_a_wrong_guess_does(
        self, store: SessionStore
    ) -> None:
        """A secret inside a word (``unter2`` of ``hunter2``): a query naming the whole word
        must answer as a query naming a word found nowhere, though the raw index holds
        it. Here the word's message is older than the common word's newest matches, so
        only the hidden word could bring it in."""
        b = BranchBuilder(session_id="guess", rng=random.Random(12))
        hidden = b.message("user", "hunter2 deploy")
        for n in range(SEARCH_CANDIDATES_PER_TERM + 5):
            b.message("user", f"deploy note number {n} later today")
        await _load(store, b.entries, None)
        secrets = ["unter2"]
        right = await store.search("guess", "hunter2 deploy", limit=100, secrets=secrets)
        wrong = await store.search("guess", "hunter3 deploy", limit=100, secrets=secrets)
        assert [(h.id, h.score, h.text) for h in right] == [(h.id, h.score, h.text) for h in wrong]
        assert hidden.id not in _ids(right)
        # Without the secret the word finds its message: the rule did the work.
        assert hidden.id in _ids(await store.search("guess", "hunter2 deploy", limit=100))

    async def test_hidden_copies_of_a_word_take_no_place_among_its_newest(
        self, store: SessionStore
    ) -> None:
        """A word a secret hides in many newer messages (``gamma`` of ``beta gam...``) and
        shows in an older one: the older one is found by the word, as by any other word
        it shows, so the answer cannot tell the hidden text from a wrong guess of it."""
        b = BranchBuilder(session_id="hide", rng=random.Random(13))
        shown = b.message("user", "Greek letters: gamma and sigma.")
        for n in range(SEARCH_CANDIDATES_PER_TERM + 5):
            b.message("user", f"code beta gamma {n}")
        await _load(store, b.entries, None)
        secrets = ["beta gam"]
        for query in ("gamma", "sigma", "gamma sigma"):
            assert _ids(await store.search("hide", query, limit=100, secrets=secrets)) == [
                shown.id
            ], query
        # Without the secret the newer messages show the word and take its places.
        assert shown.id not in _ids(await store.search("hide", "gamma", limit=100))

    async def test_inactive_memory_only_when_asked_and_marked(self, store: SessionStore) -> None:
        b = BranchBuilder(session_id="act", rng=random.Random(5))
        m = b.message("user", "the pgbouncer pool size is twenty")
        b.observe(1, sources=[m.id], text="pgbouncer pool size twenty")
        dropped = b.model.observations[-1].id
        b.observe(1, sources=[m.id], text="pgbouncer pool tuned")
        live = b.model.observations[-1].id
        old = _reflection(b, [dropped], "pgbouncer pool was sized")
        new = _reflection(b, [live], "pgbouncer pool consolidated", supersedes=[old])
        b.drop([dropped])
        await _load(store, b.entries, None)
        active = await store.search("act", "pgbouncer", kinds=["observation", "reflection"])
        assert set(_ids(active)) == {live, new}
        assert all(h.status == "active" for h in active)
        everything = await store.search(
            "act", "pgbouncer", kinds=["observation", "reflection"], include_inactive=True
        )
        status = {h.id: h.status for h in everything}
        assert status == {live: "active", new: "active", dropped: "dropped", old: "superseded"}
        assert {h.id: h.to_json().get("status") for h in everything}[old] == "superseded"
        by_id = {h.id: h for h in everything}
        assert by_id[new].source_entry_ids == (m.id,)
        assert by_id[dropped].source_entry_ids == (m.id,)

    async def test_a_common_term_brings_its_newest_matches_and_a_rare_one_all(
        self, store: SessionStore
    ) -> None:
        b = BranchBuilder(session_id="cap", rng=random.Random(9))
        rare = b.message("user", "the vendor contract renewal is due")
        for n in range(SEARCH_CANDIDATES_PER_TERM + 60):
            b.message("user", f"queue depth report {n}")
            if n == 120:
                fork_at = b.path[-1].id
        main_leaf = b.path[-1].id
        b.checkout(fork_at)
        for n in range(90):
            b.message("user", f"queue depth report fork {n}")
        fork_leaf = b.path[-1].id
        reference = MemoryStore()
        for target in (store, reference):
            await _load(target, b.entries, main_leaf)
        for leaf in (main_leaf, fork_leaf):
            for query in ("queue", "queue contract", "vendor report", "depth fork"):
                expected = await reference.search("cap", query, leaf_id=leaf, limit=100)
                assert await store.search("cap", query, leaf_id=leaf, limit=100) == expected
            both = await store.search("cap", "queue contract", leaf_id=leaf, limit=100)
            assert rare.id in _ids(both), "a rare term reaches back past the common one's"
            query = "queue" if leaf == main_leaf else "depth fork"
            newest = await store.search("cap", query, leaf_id=leaf, limit=1)
            assert _ids(newest) == [leaf], "equal scores: the newest first"

    async def test_a_deleted_session_leaves_no_hit(self, store: SessionStore) -> None:
        b = BranchBuilder(session_id="del", rng=random.Random(6))
        for n in range(12):
            b.message("user", f"rollback ticket {n} for the oncall review")
        b.observe(2)
        await _load(store, b.entries, None)
        before = await store.search("del", "rollback oncall", limit=100)
        assert len(before) >= 12
        await store.delete_session("del")
        assert await store.search("del", "rollback oncall") == []
        # The same entries again: the same hits, none twice (no row of the old index left).
        await _load(store, b.entries, None)
        assert await store.search("del", "rollback oncall", limit=100) == before

    @pytest.mark.parametrize(
        ("arguments", "error", "field"),
        [
            ({"query": ""}, InvalidInputError, "query"),
            ({"query": "   "}, InvalidInputError, "query"),
            ({"query": None}, InvalidInputError, "query"),
            ({"query": "x" * (SEARCH_QUERY_MAX_CHARS + 1)}, LimitExceededError, "query"),
            ({"query": " ".join(f"w{n}" for n in range(40))}, LimitExceededError, "query"),
            ({"query": "bad \ud800 half"}, InvalidInputError, "query"),
            ({"query": "a", "limit": 0}, InvalidInputError, "limit"),
            ({"query": "a", "limit": 101}, PageTooLargeError, "limit"),
            ({"query": "a", "limit": True}, InvalidInputError, "limit"),
            ({"query": "a", "limit": "5"}, InvalidInputError, "limit"),
            ({"query": "a", "kinds": ["memory"]}, InvalidInputError, "kinds"),
            ({"query": "a", "kinds": []}, InvalidInputError, "kinds"),
            ({"query": "a", "include_inactive": "yes"}, InvalidInputError, "include_inactive"),
            ({"query": "a", "invalidated_ids": "abc"}, InvalidInputError, None),
        ],
    )
    async def test_bad_arguments_are_typed_errors(
        self,
        store: SessionStore,
        arguments: dict[str, Any],
        error: type[Exception],
        field: str | None,
    ) -> None:
        b = BranchBuilder(session_id="bad", rng=random.Random(7))
        b.message("user", "billing")
        await _load(store, b.entries, None)
        arguments = dict(arguments)  # the parameters are shared by every adapter's run
        query = arguments.pop("query")
        with pytest.raises(error) as raised:
            await store.search("bad", query, **arguments)
        if field is not None:
            assert getattr(raised.value, "field", None) == field
        assert [e.id for e in await store.list("bad")] == [e.id for e in b.entries]

    async def test_engine_query_syntax_is_plain_text(self, store: SessionStore) -> None:
        b = BranchBuilder(session_id="syn", rng=random.Random(8))
        hit = b.message("user", "the cache latency NEAR the alert threshold")
        await _load(store, b.entries, None)
        for query in (
            'cache OR "latency',
            "cache* AND NOT alert",
            "NEAR(cache latency)",
            "'; DROP TABLE entries; --",
            "latency:cache ^alert {x}",
            "%_%",
        ):
            hits = await store.search("syn", query)
            assert _ids(hits) in ([hit.id], []), query
        assert _ids(await store.search("syn", "NEAR(cache latency)")) == [hit.id]
        assert _ids(await store.search("syn", "%_%")) == []
        assert len(await store.list("syn")) == 1


def _reflection(
    builder: BranchBuilder,
    observation_ids: list[str],
    text: str,
    supersedes: list[str] | None = None,
) -> str:
    """Append a reflection with ``text`` over ``observation_ids``; its id."""
    from ..core.records import REFLECTIONS_RECORDED
    from ..entries import custom_entry

    memory_id = builder.memory_id()
    wire: dict[str, Any] = {"id": memory_id, "text": text, "observationIds": observation_ids}
    if supersedes:
        wire["supersedesReflectionIds"] = supersedes
    entry_id, stamp, parent = builder._next()
    entry = custom_entry(
        builder.session_id,
        {"type": REFLECTIONS_RECORDED, "reflections": [wire]},
        parent_id=parent,
        entry_id=entry_id,
        timestamp=stamp,
    )
    builder._push(entry, builder.model)
    return memory_id
