"""``prism-om eval`` with a model: memory by the model, QA with memory vs transcript, judged.

The loopback chat-completions server plays the model: the observer records one
observation per message it is shown, the reflector records nothing, the answerer quotes
the latest context line sharing most words with the question, and the judge says yes when the
reference answer is in the response.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.chat_server import ChatServer, Raw, Reply, Stall
from support.cli import ok, run_cli

from prism_om.eval import run_eval
from prism_om.eval.judge import ANSWER_SYSTEM
from prism_om.eval.matching import key_words
from prism_om.providers.openai_compat import OpenAICompatibleProvider

LONGMEMEVAL = Path(__file__).parents[1] / "data" / "eval" / "longmemeval_synthetic.json"
_HEADER = re.compile(r"^\[entry (\S+) \| (\w+) \| [^\]]+\]$", re.M)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else ""


def fake_model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    tools = {t["function"]["name"] for t in body.get("tools") or ()}
    if tools:
        if any(m["role"] == "tool" for m in messages) or "record_observations" not in tools:
            return Reply()  # done (and the reflector records nothing)
        prompt = next(_text(m) for m in messages if m["role"] == "user")
        observations = [
            {"text": f"A {role} message was recorded.", "sourceEntryIds": [entry_id]}
            for entry_id, role in _HEADER.findall(prompt)
        ]
        arguments = json.dumps({"observations": observations})
        return Reply(tool_calls=[("call_obs", "record_observations", arguments)])
    system = _text(messages[0]) if messages[0]["role"] == "system" else ""
    prompt = _text(messages[-1])
    if system == ANSWER_SYSTEM:
        question = prompt.rsplit("Question:", 1)[1]
        wanted = set(key_words(question))
        lines = prompt.split("Question:")[0].splitlines()
        # The latest of the best-matching lines: a knowledge update wins over the old fact.
        best = max(range(len(lines)), key=lambda i: (len(wanted & set(key_words(lines[i]))), i))
        return Reply(text=lines[best])
    answer = prompt.split("Correct Answer: ", 1)[-1].split("\n", 1)[0].lower()
    response = prompt.split("Model Response: ", 1)[-1].lower()
    return Reply(text="Yes." if answer and answer in response else "no")


class ModelServer(ChatServer):
    """Replies computed from the request just recorded (the harness calls one at a time)."""

    def next_reply(self) -> Reply | Raw | Stall | None:
        with self._lock:
            body = self.requests[-1].body
        return fake_model(body)


@pytest.fixture
def model_server() -> Iterator[ChatServer]:
    server = ModelServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def test_model_run_judges_answers_with_memory_and_with_transcript(
    model_server: ChatServer,
) -> None:
    async with OpenAICompatibleProvider(model_server.url, "fake-model") as provider:
        # Forced after each session: the instances are far below the observer's threshold,
        # and what is judged here is the memory a model made of all of them.
        summary = await run_eval(
            LONGMEMEVAL, provider=provider, model="fake-model", observe="per-session", force=True
        )
    overall = summary["overall"]
    assert summary["provider"] == "fake-model"
    assert overall["failures"] == 0
    assert overall["memoryAccuracy"]["of"] == overall["scored"] == 5
    assert overall["transcriptAccuracy"]["of"] == 5
    judged = [q for c in summary["conversations"] for q in c["questions"]]
    for key, side in (
        ("requestAccuracy", "withRequest"),
        ("memoryAccuracy", "withMemory"),
        ("transcriptAccuracy", "withTranscript"),
    ):
        assert overall[key]["of"] == 5
        assert overall[key]["hits"] == sum(q[side]["correct"] for q in judged)
    # The fake reader quotes the transcript line holding "Mazda 3"; the judge says yes.
    update = next(q for q in judged if q["category"] == "knowledge-update")
    assert "Mazda 3" in update["withTranscript"]["answer"]
    assert update["withTranscript"]["correct"] is True
    assert overall["memoryContextTokens"] < overall["transcriptContextTokens"]
    # The model's observations cite every message shown; each question carries both
    # judged answers.
    for convo in summary["conversations"]:
        assert convo["observations"] == convo["turns"]
        for q in convo["questions"]:
            assert {"withRequest", "withMemory", "withTranscript"} <= set(q)
            assert q["withMemory"]["contextTokens"] > 0
    bodies = [r.body for r in model_server.requests]
    answers = [b for b in bodies if b["messages"][0].get("content") == ANSWER_SYSTEM]
    # Answered with the next request (memory block and window), the memory alone, and the
    # transcript.
    assert len(answers) == 15
    assert sum("<recent-messages>" in _text(b["messages"][-1]) for b in answers) == 5
    assert sum("# Observational memory" in _text(b["messages"][-1]) for b in answers) >= 5
    assert sum("Context:\n## " in _text(b["messages"][-1]) for b in answers) == 5
    assert all(b["model"] == "fake-model" for b in bodies)


def test_cli_eval_with_a_local_model(model_server: ChatServer, tmp_path: Path) -> None:
    done = run_cli(
        "eval",
        str(LONGMEMEVAL),
        "--base-url",
        model_server.url,
        "--model",
        "fake-model",
        "--api-key-env",
        "PRISM_EVAL_TEST_NO_KEY",
        "--json",
        cwd=tmp_path,
    )
    summary = json.loads(ok(done))
    assert "memoryAccuracy" in summary["categories"]["knowledge-update"]
    assert "PRISM_EVAL_TEST_NO_KEY is not set" in done.stderr
