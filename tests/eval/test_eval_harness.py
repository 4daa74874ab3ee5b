"""``prism-om eval`` offline: benchmark formats, answer matching, figures, CLI output."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import failed, ok, run_cli

from prism_om.errors import ImportFormatError
from prism_om.eval import (
    answer_in_text,
    key_words,
    load_eval_file,
    parse_eval_data,
    plot_summary,
    run_eval,
)
from prism_om.stores import open_store

DATA = Path(__file__).parents[1] / "data" / "eval"
LOCOMO = DATA / "locomo_synthetic.json"
LONGMEMEVAL = DATA / "longmemeval_synthetic.json"


def small_locomo() -> dict[str, Any]:
    return {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben!"},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "I adopted a puppy named Rex."},
            {
                "speaker": "Ana",
                "dia_id": "D1:3",
                "text": "Look at my garden.",
                "img_url": ["x"],
                "blip_caption": "a photo of red tulips",
            },
        ],
        "session_2_date_time": "9:05 am on 20 May, 2023",
        "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "I moved to Porto."}],
        "qa": [
            {"question": "Pet?", "answer": "Rex", "evidence": ["D1:2"], "category": 4},
            {
                "question": "City?",
                "answer": "Porto",
                "evidence": ["D:2:1", "D30:05"],
                "category": 1,
            },
            {
                "question": "Ana's pet?",
                "adversarial_answer": "Rex",
                "evidence": ["D1:2"],
                "category": 5,
            },
        ],
    }


# -- formats -------------------------------------------------------------------------------


def test_locomo_turns_take_session_dates_roles_names_and_captions() -> None:
    [convo] = parse_eval_data(small_locomo())
    assert convo.format == "locomo"
    first, second, third, fourth = convo.turns
    assert (first.role, second.role) == ("user", "assistant")
    assert first.text == "Ana: Hi Ben!"
    assert first.timestamp == "2023-05-08T13:56:00.000Z"
    assert second.timestamp == "2023-05-08T13:57:00.000Z"
    assert fourth.timestamp == "2023-05-20T09:05:00.000Z"
    assert "red tulips" in third.text
    pet, city, adversarial = convo.questions
    assert pet.evidence == ("D1:2",) and pet.category == "single-hop"
    # "D:2:1" is read leniently; "D30:05" names no turn and is counted.
    assert city.evidence == ("D2:1",) and city.unmapped_evidence == ("D30:05",)
    assert adversarial.scored is False and adversarial.answer == "Rex"


def test_nested_and_flat_layouts_read_alike() -> None:
    flat = small_locomo()
    nested = {
        "sample_id": "s1",
        "conversation": {k: v for k, v in flat.items() if k != "qa"},
        "qa": flat["qa"],
    }
    [a], [b] = parse_eval_data(flat), parse_eval_data([nested])
    assert a.turns == b.turns and a.questions[0].answer == b.questions[0].answer
    assert b.id == "s1"


def test_longmemeval_instances_keep_tool_calls_and_has_answer_evidence() -> None:
    conversations = load_eval_file(LONGMEMEVAL)
    assert all(c.format == "longmemeval" for c in conversations)
    code = next(c for c in conversations if c.id == "synthetic_code_1")
    roles = {t.role for t in code.turns}
    assert roles == {"user", "assistant", "tool"}
    assert any(t.tool_calls for t in code.turns)
    assert any("KeyError" in t.text for t in code.turns if t.role == "tool")
    [question] = code.questions
    assert question.evidence and all(k.startswith("s_code:") for k in question.evidence)
    assert question.question_date == "2024-04-03T09:00:00.000Z"
    abstention = next(c for c in conversations if c.id.endswith("_abs"))
    assert abstention.questions[0].abstention


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"speaker_a": "A", "speaker_b": "B", "qa": []}, "no session_<n>"),
        (
            {**small_locomo(), "session_1_date_time": "yesterday"},
            "session_1_date_time 'yesterday'",
        ),
        (
            {**small_locomo(), "session_2": [{"speaker": "Zed", "text": "hi"}]},
            "speaker 'Zed'",
        ),
        ({**small_locomo(), "qa": [{"question": "q", "category": 4}]}, "qa[0]: field 'answer'"),
        ([{"question_id": "x", "haystack_sessions": [[]], "haystack_dates": []}], "differ"),
        ([{"nothing": 1}], "neither a LoCoMo"),
    ],
)
def test_malformed_files_name_the_item_and_field(data: Any, fragment: str) -> None:
    with pytest.raises(ImportFormatError) as caught:
        parse_eval_data(data, name="bench.json")
    assert "bench.json" in str(caught.value) and fragment in str(caught.value)


def test_unreadable_file_is_a_format_error(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ImportFormatError, match=r"bad\.json: not JSON"):
        load_eval_file(tmp_path / "bad.json")


# -- matching -------------------------------------------------------------------------------


def test_answer_matching_rule() -> None:
    assert key_words("To get off the phone, and relax!") == ["get", "phone", "relax"]
    assert key_words("14,500 dollars") == ["14500", "dollars"]
    assert key_words("St. Mary's hospital") == ["st", "marys", "hospital"]
    assert answer_in_text("10 weeks", "Biscuit is 10 weeks old.")
    assert not answer_in_text("10 weeks", "Biscuit is 10 days old.")
    assert not answer_in_text("cat", "a category")  # whole words only
    assert not answer_in_text("the", "the")  # nothing left to check


# -- running ---------------------------------------------------------------------------------


async def test_offline_run_reports_every_figure_consistently() -> None:
    # A threshold the synthetic conversations reach, so the observer runs at it.
    summary = await run_eval(LOCOMO, settings={"observation": {"messageTokens": 300}})
    overall = summary["overall"]
    assert overall["conversations"] == 3 and overall["turns"] == 418
    assert overall["failures"] == 0
    assert overall["scored"] == sum(c["scored"] for c in summary["categories"].values())
    assert set(summary["categories"]) == {
        "single-hop",
        "multi-hop",
        "temporal",
        "open-domain",
        "adversarial",
    }
    assert summary["categories"]["adversarial"]["scored"] == 0
    assert overall["unmappedEvidence"] == 3
    for convo in summary["conversations"]:
        assert convo["memoryTokens"] > 0 and convo["transcriptTokens"] > 0
        assert convo["memoryRatio"] == round(convo["memoryTokens"] / convo["transcriptTokens"], 4)
        speakers = convo["speakers"]
        assert len(speakers) == 2
        assert sum(s["observations"] for s in speakers.values()) == pytest.approx(
            convo["observations"], abs=0.05
        )
        assert sum(s["dropped"] for s in speakers.values()) == pytest.approx(
            convo["droppedObservations"], abs=0.05
        )
        for q in convo["questions"]:
            assert 0 <= q["evidenceCited"] <= q["evidence"]
            if q["inMemory"]:
                assert q["missingWords"] == []


async def test_a_named_store_keeps_each_conversation_as_a_session(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'eval.db'}"
    first = await run_eval(LONGMEMEVAL, db=url)
    again = await run_eval(LONGMEMEVAL, db=url)
    async with await open_store(url) as store:
        sessions = set(await store.sessions())
    ids = {c["sessionId"] for c in first["conversations"]}
    assert ids <= sessions and {c["sessionId"] for c in again["conversations"]} <= sessions
    assert not ids & {c["sessionId"] for c in again["conversations"]}  # a rerun never adds


def test_cli_eval_prints_tables_json_and_a_plot(tmp_path: Path) -> None:
    text = ok(run_cli("eval", str(LOCOMO), cwd=tmp_path))
    assert "single-hop" in text and "per conversation" in text and "spread over 3" in text
    plot = tmp_path / "eval.png"
    done = run_cli("eval", str(LONGMEMEVAL), "--json", "--plot", str(plot), cwd=tmp_path)
    summary = json.loads(ok(done))
    assert summary["format"] == "longmemeval" and summary["provider"] == "offline"
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_cli_eval_refuses_bad_input(tmp_path: Path) -> None:
    assert "no such file" in failed(run_cli("eval", "missing.json", cwd=tmp_path), 2)
    line = failed(run_cli("eval", str(LOCOMO), "--model", "m", cwd=tmp_path), 2)
    assert "--base-url and --model go together" in line
    line = failed(run_cli("eval", str(LOCOMO), "--pool-ratio", "0", cwd=tmp_path), 2)
    assert "--pool-ratio" in line


async def test_plot_is_skipped_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = await run_eval(LONGMEMEVAL)
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert plot_summary(summary, tmp_path / "x.png") is False
    assert not (tmp_path / "x.png").exists()


async def test_observe_once_flushes_once_after_the_whole_import() -> None:
    seen: list[str] = []
    summary = await run_eval(
        LONGMEMEVAL, observe="once", progress=lambda done, total, label: seen.append(label)
    )
    assert summary["observe"] == "once"
    assert len(seen) == summary["overall"]["conversations"]
    assert all(label.endswith("all sessions") for label in seen)
    default = await run_eval(LONGMEMEVAL)
    assert default["observe"] == "per-message" and default["forced"] is False
