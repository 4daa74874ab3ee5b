"""``prism-om eval`` measures what users get: memory made as an attached agent makes it (at
the configured thresholds, not forced), the next request scored beside the memory alone,
the transcript dated as the data dates it, and the public files read as published.

The data is ``tests/data/eval/locomo_published_shape.json``: two conversations in one file,
nested as LoCoMo publishes them (``sample_id``, ``conversation``, ``qa``, with the
``event_summary`` / ``observation`` / ``session_summary`` keys beside), session dates like
``1:56 pm on 8 May, 2023``, evidence like ``D1:3`` and ``D2:1; D2:3``.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from support.cli import failed, ok, run_cli

from prism_om.attach import create_observational_memory
from prism_om.eval import eval_settings, load_eval_files, run_eval
from prism_om.eval.run import transcript_text
from prism_om.host.agent import Agent
from prism_om.host.context import estimate_request_tokens
from prism_om.session import Session
from prism_om.stores import open_store
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider
from prism_om.workers.one_model import one_model_workers

DATA = Path(__file__).parents[1] / "data" / "eval"
PUBLISHED = DATA / "locomo_published_shape.json"
# A threshold these short conversations cross a few times, so the observer runs at it.
LOW = {"observation": {"messageTokens": 60}}


def _questions(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["answer"]: q for c in summary["conversations"] for q in c["questions"]}


def _split(tmp_path: Path) -> list[Path]:
    """The published file as one file per conversation (the other way it is shipped)."""
    paths = []
    for item in json.loads(PUBLISHED.read_text()):
        path = tmp_path / f"{item['sample_id']}.json"
        path.write_text(json.dumps(item))
        paths.append(path)
    return paths


# -- the transcript is dated as the data dates it ---------------------------------------------


def test_the_transcript_heads_each_session_with_its_date_as_written() -> None:
    first = load_eval_files(PUBLISHED)[0]
    text = transcript_text(first)
    assert "## session_1 (1:56 pm on 8 May, 2023)" in text
    assert "2023-05-08" not in text  # an ISO date no answer is written in


async def test_answers_written_as_dates_match_the_transcript() -> None:
    questions = _questions(await run_eval(PUBLISHED))
    # "When did Caroline go to the LGBTQ support group?" -- "today", in the 8 May session.
    for answer in ("8 May 2023", "25 May 2023", "9 June 2023", "29 January 2023"):
        assert questions[answer]["inTranscript"] is True, answer
    # The day before the session is not in any heading: no date is invented for it.
    assert questions["19 January 2023"]["inTranscript"] is False


# -- the files as published ---------------------------------------------------------------------


def test_one_file_of_many_conversations_reads_them_all() -> None:
    conversations = load_eval_files(PUBLISHED)
    assert [c.id for c in conversations] == ["conv-a", "conv-b"]
    assert [len(c.questions) for c in conversations] == [12, 9]
    assert conversations[0].session_dates == (
        "1:56 pm on 8 May, 2023",
        "1:14 pm on 25 May, 2023",
        "6:55 pm on 9 June, 2023",
    )


async def test_several_files_and_a_directory_read_like_the_one_file(tmp_path: Path) -> None:
    one = await run_eval(PUBLISHED)
    files = await run_eval(_split(tmp_path))
    folder = await run_eval(tmp_path)
    for summary in (files, folder):
        assert [c["id"] for c in summary["conversations"]] == ["conv-a", "conv-b"]
        assert summary["overall"]["scored"] == one["overall"]["scored"] == 19
        assert summary["overall"]["keywordsInTranscript"] == one["overall"]["keywordsInTranscript"]


def test_an_id_two_files_share_is_told_apart_by_the_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    data = PUBLISHED.read_text()
    (tmp_path / "a" / "locomo_1.json").write_text(data)
    (tmp_path / "b" / "locomo_2.json").write_text(data)
    conversations = load_eval_files([tmp_path / "a", tmp_path / "b" / "locomo_2.json"])
    ids = [c.id for c in conversations]
    assert ids == ["locomo_1/conv-a", "locomo_1/conv-b", "locomo_2/conv-a", "locomo_2/conv-b"]
    assert conversations[0].questions[0].id == "locomo_1/conv-a/q0"


def test_cli_reads_several_files_and_directories(tmp_path: Path) -> None:
    paths = _split(tmp_path)
    summary = json.loads(ok(run_cli("eval", *map(str, paths), "--json", cwd=tmp_path)))
    assert summary["overall"]["conversations"] == 2
    summary = json.loads(ok(run_cli("eval", str(tmp_path), "--json", cwd=tmp_path)))
    assert summary["overall"]["conversations"] == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holding no .json file" in failed(run_cli("eval", str(empty), cwd=tmp_path), 2)
    mixed = run_cli("eval", str(PUBLISHED), str(DATA / "longmemeval_synthetic.json"), cwd=tmp_path)
    assert "evaluate one format at a time" in failed(mixed, 2)


# -- memory is made as an attached agent makes it -------------------------------------------------


async def test_by_default_the_observer_waits_for_its_threshold() -> None:
    summary = await run_eval(PUBLISHED)
    assert summary["forced"] is False and summary["observe"] == "per-message"
    assert summary["settings"]["observation.messageTokens"] == 10_000
    assert "attached agent" in summary["observedAs"] and "FORCED" not in summary["observedAs"]
    # A few hundred tokens never reach the 10,000-token threshold: no memory, and every
    # message is in the request raw (what a user with these settings gets).
    for convo in summary["conversations"]:
        assert convo["observations"] == 0 and convo["memoryTokens"] == 0
        assert convo["uncoveredMessages"] == convo["windowMessages"] == convo["turns"]
    assert summary["overall"]["evidenceInRequest"]["rate"] == 1.0


async def test_forcing_every_flush_is_an_option_that_says_so() -> None:
    summary = await run_eval(PUBLISHED, force=True)
    assert summary["forced"] is True and summary["observedAs"].startswith("FORCED")
    for convo in summary["conversations"]:
        assert convo["observations"] > 0 and convo["uncoveredMessages"] == 0


async def test_at_a_reachable_threshold_memory_covers_what_crossed_it(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'eval.db'}"
    summary = await run_eval(PUBLISHED, db=url, settings=LOW)
    async with await open_store(url) as store:
        for convo in summary["conversations"]:
            assert convo["observations"] > 0
            # The observer ran each time the unobserved messages reached the threshold,
            # so what it left is the tail below it: shown raw, none left out.
            snapshot = await store.snapshot(convo["sessionId"], recent=8)
            assert 0 < snapshot.pending_tokens < 60
            assert convo["uncoveredMessages"] > 0 and convo["omittedUncoveredMessages"] == 0


# -- the next request is scored beside the memory alone -----------------------------------------


async def test_the_request_holds_what_memory_has_not_covered_yet() -> None:
    questions = _questions(await run_eval(PUBLISHED, settings=LOW))
    # The last message of conv-a ("My pottery bowl ... is turquoise") is uncovered.
    bowl = questions["turquoise"]
    assert bowl["inMemory"] is False and bowl["inRequest"] is True
    assert bowl["evidenceShownRaw"] == bowl["evidenceInRequest"] == bowl["evidence"] == 1
    assert bowl["evidenceCited"] == 0 and bowl["missingInRequest"] == []


async def test_the_request_is_the_attached_agents_next_request(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'eval.db'}"
    summary = await run_eval(PUBLISHED, db=url, settings=LOW)
    settings = eval_settings(LOW)
    async with await open_store(url) as store:
        for convo in summary["conversations"]:
            # An agent attached afresh to the stored session would send this request.
            workers = OfflineMemoryProvider()
            agent = Agent(Session(store, convo["sessionId"]), provider=workers)
            create_observational_memory(settings).attach(
                agent, **one_model_workers(workers, OFFLINE_MODEL)
            )
            request = await agent.request_preview(None)
            assert estimate_request_tokens(request) == convo["requestTokens"]
            assert convo["requestTokens"] >= convo["memoryBlockTokens"] + convo["windowTokens"]
            assert convo["requestRatio"] == round(
                convo["requestTokens"] / convo["transcriptTokens"], 4
            )


# -- figures per category, per conversation and overall, with the spread -------------------------


async def test_every_figure_per_conversation_and_its_spread() -> None:
    summary = await run_eval(PUBLISHED, settings=LOW)
    overall, spread = summary["overall"], summary["overall"]["spread"]
    for key in ("keywordsInRequest", "keywordsInMemory", "keywordsInTranscript"):
        rates = [c["figures"][key]["rate"] for c in summary["conversations"]]
        assert spread[key]["min"] == round(min(rates), 4)
        assert spread[key]["max"] == round(max(rates), 4)
        assert spread[key]["median"] == round(statistics.median(rates), 4)
        assert spread[key]["stdev"] == round(statistics.pstdev(rates), 4)
        hits = sum(c["figures"][key]["hits"] for c in summary["conversations"])
        assert overall[key]["hits"] == hits
    for convo in summary["conversations"]:
        by_category = convo["categories"]
        assert sum(f["scored"] for f in by_category.values()) == convo["figures"]["scored"]
    assert spread["requestRatio"]["of"] == spread["memoryRatio"]["of"] == 2
    assert overall["requestTokens"] == sum(c["requestTokens"] for c in summary["conversations"])


async def test_one_category_at_a_time() -> None:
    summary = await run_eval(PUBLISHED, categories=["2"])
    assert set(summary["categories"]) == {"temporal"}
    assert summary["overall"]["scored"] == 7
    with pytest.raises(Exception, match="no question of category 'nonsense'"):
        await run_eval(PUBLISHED, categories=["nonsense"])


def test_cli_says_how_memory_was_made_and_keeps_every_figure(tmp_path: Path) -> None:
    text = ok(run_cli("eval", str(PUBLISHED), cwd=tmp_path))
    assert text.startswith("observed as an attached agent")
    assert "answer in request" in text and "spread over 2" in text
    forced = ok(run_cli("eval", str(PUBLISHED), "--force", cwd=tmp_path))
    assert forced.startswith("FORCED")
    done = run_cli(
        "eval",
        str(PUBLISHED),
        "--set",
        "observation.messageTokens=60",
        "--category",
        "single-hop",
        "--json",
        cwd=tmp_path,
    )
    summary = json.loads(ok(done))
    assert summary["settings"]["observation.messageTokens"] == 60
    assert set(summary["categories"]) == {"single-hop"}
    convo = summary["conversations"][0]
    assert {"requestTokens", "memoryBlockTokens", "windowTokens", "figures", "categories"} <= set(
        convo
    )
    assert {"inRequest", "evidenceInRequest", "evidenceShownRaw"} <= set(convo["questions"][0])


def test_cli_refuses_a_bad_setting(tmp_path: Path) -> None:
    line = failed(run_cli("eval", str(PUBLISHED), "--set", "observation", cwd=tmp_path), 2)
    assert "--set takes KEY=VALUE" in line
    line = failed(run_cli("eval", str(PUBLISHED), "--set", "observation.nope=1", cwd=tmp_path), 2)
    assert "nope" in line
