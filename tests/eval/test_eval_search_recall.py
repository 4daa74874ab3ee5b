"""Search recall of the evidence turns (``prism_om.eval.search_recall``): hand-built
conversations whose hits are known, so a wrong count, a wrong credit or a wrong mean fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.cli import ok, run_cli

from prism_om.eval import parse_eval_data, run_eval
from prism_om.eval.search_recall import (
    LOCOMO_PAPER,
    SearchRecall,
    question_search_recall,
    search_query,
    search_recall_figures,
    unit_tokens,
)
from prism_om.session import Session
from prism_om.stores import open_store
from prism_om.tokens import get_estimator

DATA = Path(__file__).parents[1] / "data" / "eval"


def conversation(sample_id: str, session_1: list[str], qa: list[dict[str, Any]]) -> dict[str, Any]:
    """A LoCoMo conversation as published: Ana and Ben, two dated sessions."""
    speakers = ["Ana", "Ben"]
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": speakers[n % 2], "dia_id": f"D1:{n + 1}", "text": text}
                for n, text in enumerate(session_1)
            ],
            "session_2_date_time": "9:05 am on 20 May, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "Big news: I moved to Porto."},
                {"speaker": "Ben", "dia_id": "D2:2", "text": "Porto is lovely in spring."},
            ],
        },
        "qa": qa,
    }


TINY = conversation(
    "conv-tiny",
    [
        "Hi Ben! How was the weekend?",
        "I adopted a puppy named Rex at the shelter.",
        "A puppy! Lucky you.",
    ],
    [
        # Terms puppy, adopt, mov: D1:2 holds two of them and ranks first, the other
        # evidence turn D2:1 ("moved") second, the distractor D1:3 ("puppy") after it.
        {
            "question": "Which puppy was adopted, and who moved?",
            "answer": "Rex; Ana moved to Porto",
            "evidence": ["D1:2", "D2:1"],
            "category": 1,
        },
        # "shelter" is in D1:2 only: found first.
        {
            "question": "When was the shelter visit?",
            "answer": "8 May 2023",
            "evidence": ["D1:2"],
            "category": 2,
        },
        # No word of it is in the conversation: nothing found at any k.
        {
            "question": "What colour is the kayak?",
            "answer": "red",
            "evidence": ["D2:2"],
            "category": 4,
        },
        {
            "question": "What did Ana adopt?",
            "adversarial_answer": "a puppy",
            "evidence": ["D1:2"],
            "category": 5,
        },
    ],
)


async def test_recall_at_k_of_a_known_conversation(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([TINY]))
    summary = await run_eval(path)
    union = summary["overall"]["searchRecall"]["union"]
    # Per question (1/2, 1, 0) at k=1 and (1, 1, 0) at k=5 and 10: the mean of each.
    assert union["questions"] == 3 and union["evidenceTurns"] == 4
    assert union["recallAt1"] == 0.5
    assert union["recallAt5"] == round(2 / 3, 4) == union["recallAt10"]
    # Nothing is observed at the defaults: memory finds nothing, the union is the messages.
    recall = summary["overall"]["searchRecall"]
    assert recall["memory"]["recallAt10"] == 0.0 and recall["memory"]["tokensTop10"] == 0.0
    assert recall["messages"] == union
    by_category = summary["categories"]
    assert by_category["multi-hop"]["searchRecall"]["union"]["recallAt1"] == 0.5
    assert by_category["multi-hop"]["searchRecall"]["union"]["recallAt5"] == 1.0
    assert by_category["temporal"]["searchRecall"]["union"]["recallAt1"] == 1.0
    assert by_category["single-hop"]["searchRecall"]["union"]["recallAt10"] == 0.0
    assert by_category["adversarial"]["searchRecall"]["union"]["questions"] == 0
    questions = {q["id"]: q for q in summary["conversations"][0]["questions"]}
    multi, when, kayak, adversarial = questions.values()
    # Its three hits (D1:2, D2:1, D1:3) carry their whole messages' tokens.
    turns = {t.key: t.text for t in parse_eval_data([TINY])[0].turns}
    carried = sum(get_estimator().count(turns[k]) for k in ("D1:2", "D2:1", "D1:3"))
    assert multi["search"]["union"] == {
        "foundAt1": 1,
        "foundAt5": 2,
        "foundAt10": 2,
        "tokensTop5": carried,
        "tokensTop10": carried,
        "hits": 3,
        "queryCut": False,
    }
    assert when["search"]["union"]["foundAt1"] == 1
    assert kayak["search"]["union"]["hits"] == 0 and kayak["search"]["union"]["tokensTop10"] == 0
    assert adversarial["search"] == {}  # never scored, never searched
    assert summary["searchRecallPaper"] == LOCOMO_PAPER


async def test_a_hit_of_another_session_never_credits(tmp_path: Path) -> None:
    # Both conversations share the store. conv-a says the question's words; conv-b's
    # evidence turn says none of them, so its search finds nothing of its own.
    words = {
        "question": "Where is the lighthouse key hidden?",
        "answer": "under the blue stone",
        "evidence": ["D1:2"],
        "category": 4,
    }
    a = conversation(
        "conv-a", ["Hello!", "The lighthouse key is hidden under the blue stone."], [words]
    )
    b = conversation("conv-b", ["Hello!", "It is under the blue stone."], [words])
    path = tmp_path / "two.json"
    path.write_text(json.dumps([a, b]))
    summary = await run_eval(path)
    first, second = summary["conversations"]
    assert first["figures"]["searchRecall"]["union"]["recallAt1"] == 1.0
    assert second["figures"]["searchRecall"]["union"]["recallAt10"] == 0.0
    assert second["questions"][0]["search"]["union"]["hits"] == 0
    assert summary["overall"]["searchRecall"]["union"]["recallAt1"] == 0.5


async def test_a_memory_hit_credits_the_turns_it_cites_and_pays_its_whole_text() -> None:
    est = get_estimator()
    async with await open_store("memory:") as store:
        session = Session(store, "eval-s")
        other = Session(store, "eval-other")
        garden = await session.append_message("user", "Ana: I planted tulips on 8 May 2023.")
        trip = await session.append_message("assistant", "Ben: We drove to Braga on 20 May.")
        await session.append_message("user", "Ana: Nice.")
        far = await other.append_message("user", "Ana: tulips and a spring trip to Braga.")
        text = "Ana's spring: tulips in the garden and a trip to Braga. " + "More detail. " * 40
        await session.append_custom(
            {
                "type": "om.observations.recorded",
                "observations": [
                    {"id": "a00000000001", "text": text, "sourceEntryIds": [garden.id, trip.id]}
                ],
            }
        )
        ledger = await store.ledger("eval-s")
        branch = await store.list("eval-s")
        tokens_of = unit_tokens(branch, ledger.observations, ledger.reflections, est)
        question = "What happened that spring?"  # "spring" is in the observation only
        evidence = [garden.id, trip.id, far.id]  # far: another session's id, never credited
        recall = await question_search_recall(store, "eval-s", question, evidence, tokens_of)
    memory, messages, union = recall["memory"], recall["messages"], recall["union"]
    assert memory.found == (2, 2, 2) and memory.evidence == 3
    assert messages.found == (0, 0, 0) and messages.hits == 0
    assert union.found == (2, 2, 2) and union.hits == 1
    # The observation's whole text, not its 240-character snippet.
    assert memory.tokens == (est.count(text), est.count(text))
    assert est.count(text) > est.count(text[:240])


def test_a_long_question_is_cut_to_a_query_search_accepts() -> None:
    short = "When did Melanie paint a sunrise?"
    assert search_query(short) == (short, False)
    words = " ".join(f"word{n}" for n in range(40))
    query, cut = search_query(words)
    assert cut and query == " ".join(f"word{n}" for n in range(32))


def test_figures_are_the_mean_of_each_questions_share() -> None:
    one = {
        "union": SearchRecall(1, (1, 1, 1), (10, 20), 3),
        "messages": SearchRecall(1, (0, 1, 1), (10, 20), 3),
        "memory": SearchRecall(1, (0, 0, 0), (0, 0), 0),
    }
    three = {name: SearchRecall(3, (0, 0, 3), (30, 40), 10, True) for name in one}
    figures = search_recall_figures([one, three, {}])  # {}: a question never searched
    union = figures["union"]
    # Mean of per-question shares: (1 + 0) / 2 at k=1 (the pooled 1/4 would be wrong).
    assert union["recallAt1"] == 0.5 and union["recallAt10"] == 1.0
    assert union["tokensTop5"] == 20.0 and union["tokensTop10"] == 30.0
    assert union["questions"] == 2 and union["evidenceTurns"] == 4 and union["cutQueries"] == 1
    assert figures["messages"]["recallAt1"] == 0.0 and figures["messages"]["recallAt5"] == 0.5
    assert search_recall_figures([])["union"]["recallAt5"] is None


def test_cli_eval_prints_recall_beside_the_papers(tmp_path: Path) -> None:
    text = ok(run_cli("eval", str(DATA / "locomo_published_shape.json"), cwd=tmp_path))
    assert "search recall of the evidence turns" in text
    assert "LoCoMo paper (DRAGON)" in text and "58.8%" in text and "49.6%" in text
    for kinds in ("union", "messages", "memory"):
        assert kinds in text
