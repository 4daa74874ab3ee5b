"""The first read of a reopened JSONL session: the ledger and the branch's token count
read no message line, and the index sidecar's token counts are trusted only as the rest
of it is.

Work is counted in lines parsed (``SessionEntry`` validations from JSON, whoever asks for
them) and messages tokenised (``TokenEstimator.count`` calls), never in wall-clock time.
The sessions are appended in one batch of more lines than a file needs before it gets
its index sidecar (1000), so the index covers the whole file (checked in ``_build``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest

from prism_om.core.ledger import fold_ledger
from prism_om.entries import SessionEntry, entry_from_wire, message_entry
from prism_om.stores import SessionStore
from prism_om.stores.jsonl import JsonlStore
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import random_builder
from prism_om.tokens import TokenEstimator, get_estimator

SID = "om"


class Counter:
    """Counts calls of a wrapped function."""

    def __init__(self, wrapped: Callable[..., Any]) -> None:
        self.count = 0
        self.wrapped = wrapped

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.wrapped(*args, **kwargs)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Counts lines parsed into entries (``SessionEntry.model_validate_json``, which
    ``entry_from_wire`` calls for every line)."""
    counter = Counter(SessionEntry.model_validate_json)

    def validate(cls: type[SessionEntry], data: Any, *args: Any, **kwargs: Any) -> Any:
        return counter(data, *args, **kwargs)

    monkeypatch.setattr(SessionEntry, "model_validate_json", classmethod(validate))
    return counter


@pytest.fixture
def tokenised(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Counts texts encoded (``TokenEstimator.count``: what ``count_entry`` and the batched
    ``count_many`` both call once per message)."""
    counter = Counter(TokenEstimator.count)

    def count(self: TokenEstimator, text: str) -> int:
        return int(counter(self, text))

    monkeypatch.setattr(TokenEstimator, "count", count)
    return counter


def _index(directory: Path, sid: str = SID) -> Path:
    return directory / f".{sid}.index"  # the index sidecar (the store's docstring)


def _data_lines(directory: Path, sid: str = SID) -> list[bytes]:
    return (directory / f"{sid}.jsonl").read_bytes().splitlines()


# Builder steps that make more than the 1000 lines after which a file is indexed.
STEPS = 1300


class Built(dict[int, Path]):
    """Sessions already built, by seed: ``_build`` copies them (a build is ~0.3 s)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        super().__init__()
        self.factory = factory


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory)


async def _build(directory: Path, built: Built, seed: int = 5) -> None:
    """A forked session appended in one batch: its index then covers the whole file."""
    if seed not in built:
        template = built.factory.mktemp(f"first-view-{seed}")
        builder = random_builder(seed, STEPS, session_id=SID)
        async with await JsonlStore.open(template, fsync=False) as store:
            await store.append_many(builder.entries)
            await store.checkout(SID, builder.path[-1].id)
        header = json.loads(_index(template).read_bytes().splitlines()[0])
        assert header["lines"] == len(_data_lines(template)), "the index covers every line"
        built[seed] = template
    shutil.copytree(built[seed], directory, dirs_exist_ok=True)


async def _messages(directory: Path, count: int) -> None:
    """``count`` messages in one batch (an index covers them all from 1000 lines on)."""
    async with await JsonlStore.open(directory, fsync=False) as store:
        parent = None
        batch = []
        for i in range(count):
            text = f"message {i} " + "word " * (i % 7)
            entry = message_entry(SID, "user", text, parent_id=parent, entry_id=f"m{i}")
            batch.append(entry)
            parent = entry.id
        await store.append_many(batch)


async def _reads(directory: Path) -> dict[str, Any]:
    """The ledger and token count of every leaf, from a fresh open."""
    async with await JsonlStore.open(directory, fsync=False) as store:
        leaves = await store.leaves(SID)
        return {
            "tokens": [await store.branch_tokens(SID, leaf) for leaf in leaves],
            "ledgers": [await store.ledger(SID, leaf) for leaf in leaves],
            "live": [await store.live_ledger(SID, leaf) for leaf in leaves],
            "current": (await store.branch_tokens(SID), await store.ledger(SID)),
        }


async def _reads_without_index(directory: Path) -> dict[str, Any]:
    saved = _index(directory).read_bytes()
    _index(directory).unlink()
    try:
        return await _reads(directory)
    finally:
        _index(directory).write_bytes(saved)


async def test_the_index_carries_each_lines_token_count_with_its_encoding(
    tmp_path: Path, built: Built
) -> None:
    await _build(tmp_path, built)
    header, body = _index(tmp_path).read_bytes().splitlines()
    rows = json.loads(body)
    estimator = get_estimator()
    assert rows["encoding"] == estimator.name
    lines = _data_lines(tmp_path)
    assert len(rows["tokens"]) == len(lines) == json.loads(header)["lines"]
    for line, count in zip(lines, rows["tokens"], strict=True):
        entry = entry_from_wire(line, where="entry")
        expected = estimator.count_entry(entry) if entry.kind == "message" else 0
        assert count == expected, entry.id


async def test_a_reopened_ledger_and_token_count_read_no_message_line(
    tmp_path: Path, built: Built, parses: Counter, tokenised: Counter
) -> None:
    await _build(tmp_path, built)
    expected = await _reads_without_index(tmp_path)
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.entry_count(SID)  # the load: the root and the memory records
        parses.count = tokenised.count = 0
        leaves = await store.leaves(SID)
        assert [await store.branch_tokens(SID, leaf) for leaf in leaves] == expected["tokens"]
        assert [await store.ledger(SID, leaf) for leaf in leaves] == expected["ledgers"]
        assert [await store.live_ledger(SID, leaf) for leaf in leaves] == expected["live"]
        assert parses.count <= len(leaves)  # at most each leaf, checked as a leaf
        assert tokenised.count == 0


async def test_first_view_work_does_not_grow_with_the_session(
    tmp_path: Path, parses: Counter, tokenised: Counter
) -> None:
    work = []
    for size in (1200, 4800):
        directory = tmp_path / str(size)
        await _messages(directory, size)
        parses.count = tokenised.count = 0
        async with await JsonlStore.open(directory, fsync=False) as store:
            assert await store.ledger(SID) == fold_ledger([])
            assert await store.branch_tokens(SID) > 0
            await store.recent_messages(SID, 8)
            work.append((parses.count, tokenised.count))
    assert work[0] == work[1]
    assert work[1][1] == 0


async def test_counts_of_another_encoding_are_not_used(
    tmp_path: Path, built: Built, tokenised: Counter
) -> None:
    await _build(tmp_path, built)
    expected = await _reads_without_index(tmp_path)
    _rewrite_body(tmp_path, lambda rows: rows.update(encoding="another_base"))
    tokenised.count = 0
    assert await _reads(tmp_path) == expected
    assert tokenised.count > 0  # counted again with the encoding in use


def _rewrite_body(directory: Path, change: Callable[[dict[str, Any]], object]) -> None:
    """Change the index body and re-sign it, as a buggy writer would: only the checks on
    the rows themselves can refuse it."""
    header_raw, body_raw = _index(directory).read_bytes().splitlines()
    rows = json.loads(body_raw)
    change(rows)
    body = json.dumps(rows).encode()
    header = json.loads(header_raw)
    header["body"] = hashlib.sha256(body).hexdigest()
    _index(directory).write_bytes(json.dumps(header).encode() + b"\n" + body + b"\n")


def _first_kind(rows: dict[str, Any], kind: str) -> int:
    return int(rows["kinds"].index(kind))


_BAD_TOKENS: dict[str, Callable[[dict[str, Any]], object]] = {
    "tokens one short": lambda rows: rows["tokens"].pop(),
    "tokens negative": lambda rows: rows["tokens"].__setitem__(_first_kind(rows, "e"), -4),
    "tokens not an int": lambda rows: rows["tokens"].__setitem__(_first_kind(rows, "e"), 4.0),
    "tokens a bool": lambda rows: rows["tokens"].__setitem__(_first_kind(rows, "e"), True),
    "tokens on a record line": lambda rows: rows["tokens"].__setitem__(_first_kind(rows, "x"), 9),
    "tokens not a list": lambda rows: rows.update(tokens="12"),
    "tokens without encoding": lambda rows: rows.pop("encoding"),
    "encoding without tokens": lambda rows: rows.pop("tokens"),
    "encoding empty": lambda rows: rows.update(encoding=""),
    "encoding not a string": lambda rows: rows.update(encoding=7),
}


@pytest.mark.parametrize("case", sorted(_BAD_TOKENS))
async def test_an_index_with_damaged_token_counts_reads_as_no_index(
    tmp_path: Path, built: Built, parses: Counter, case: str
) -> None:
    await _build(tmp_path, built)
    expected = await _reads_without_index(tmp_path)
    _rewrite_body(tmp_path, _BAD_TOKENS[case])
    parses.count = 0
    assert await _reads(tmp_path) == expected
    assert parses.count >= len(_data_lines(tmp_path))  # every line: the index was not used


async def test_an_index_without_token_counts_still_places_lines(
    tmp_path: Path, built: Built, parses: Counter, tokenised: Counter
) -> None:
    """A sidecar written before the counts existed serves its prefix; the counts come
    from the messages, once each."""
    await _build(tmp_path, built)
    expected = await _reads_without_index(tmp_path)

    def strip(rows: dict[str, Any]) -> None:
        del rows["tokens"], rows["encoding"]

    _rewrite_body(tmp_path, strip)
    parses.count = tokenised.count = 0
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await store.entry_count(SID)
    assert parses.count < len(_data_lines(tmp_path))  # the index placed the messages
    assert await _reads(tmp_path) == expected
    assert tokenised.count > 0


async def test_an_append_counts_its_messages_once(tmp_path: Path, tokenised: Counter) -> None:
    await _messages(tmp_path, 1200)
    assert tokenised.count == 1200  # one count per message, reused by the index it wrote
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        before = await store.branch_tokens(SID)
        entry = message_entry(SID, "assistant", "one more", parent_id="m1199", entry_id="m1200")
        await store.append_many([entry])
        assert await store.branch_tokens(SID) == before + get_estimator().count_entry(entry)
    assert tokenised.count == 1202  # the new message, then the check above


async def test_every_leafs_ledger_is_the_fold_of_its_branch(store: SessionStore) -> None:
    """Ledgers are remembered by memory record: any order of leaves reads the same."""
    builder = random_builder(11, 200, session_id=SID)
    await load_builder(store, builder)
    leaves = await store.leaves(SID)
    assert len(leaves) > 1
    for leaf in [*leaves, *reversed(leaves)]:
        branch: list[SessionEntry] = await store.entries(SID, leaf)
        assert await store.ledger(SID, leaf) == fold_ledger(branch), leaf


WAYS: tuple[Literal["forward", "backward"], ...] = ("forward", "backward")


async def _public_state(store: JsonlStore) -> dict[str, Any]:
    """Everything the store answers about the session, leaf by leaf: the tree (branches,
    segments, depths), eligible messages (pages, recent), memory heads and folds."""
    leaves = await store.leaves(SID)
    per_leaf = []
    for leaf in leaves:
        branch = await store.entries(SID, leaf)
        messages = [e.id for e in branch if e.kind == "message"]
        middle = messages[len(messages) // 2] if messages else None
        pages = (
            [await store.page_messages(SID, middle, 7, way, leaf) for way in WAYS]
            if middle is not None
            else []
        )
        per_leaf.append(
            (
                branch,
                await store.entry_count(SID, leaf),
                await store.branch_tokens(SID, leaf),
                await store.memory_head(SID, leaf),
                await store.ledger(SID, leaf),
                await store.live_ledger(SID, leaf),
                await store.scope_map(SID, leaf),
                await store.recent_messages(SID, 9, leaf),
                pages,
                await store.last_compaction(SID, leaf),
            )
        )
    return {
        "leaves": leaves,
        "summaries": await store.session_summaries(),
        "all": await store.list(SID),
        "per leaf": per_leaf,
    }


@pytest.mark.parametrize("seed", [5, 6, 7])
async def test_an_indexed_reopen_builds_the_tree_a_full_parse_builds(
    tmp_path: Path, built: Built, parses: Counter, seed: int
) -> None:
    """Runs of message lines are placed in bulk: the same depths, segments, eligible
    message depths and memory heads as applying each parsed line, as every read of the
    session shows them."""
    await _build(tmp_path, built, seed=seed)
    saved = _index(tmp_path).read_bytes()
    states = []
    for with_index in (True, False):
        if not with_index:
            _index(tmp_path).unlink()
        parses.count = 0
        async with await JsonlStore.open(tmp_path, fsync=False, read_only=True) as store:
            await store.entry_count(SID)
            loaded = parses.count
            states.append(await _public_state(store))
        assert (loaded < len(_data_lines(tmp_path))) == with_index
    _index(tmp_path).write_bytes(saved)
    assert len(states[1]["leaves"]) > 1  # the session forks
    assert states[0] == states[1]
