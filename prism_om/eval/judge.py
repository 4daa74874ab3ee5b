"""Question answering with a context, judged by a model, as LongMemEval scores.

The model first answers the question from a context (the rendered memory, or the full
transcript); the same model then judges the answer against the reference with
LongMemEval's prompts: a plain one, one that tolerates off-by-one day counts for temporal
questions, one that accepts an updated answer for knowledge updates, one that accepts any
answer satisfying a preference rubric, and one for abstention items, where declining is
right. The judge's reply counts as correct when it starts with "yes".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..providers.base import Provider, ProviderMessage, ProviderRequest, TextEvent, event_stream
from ..tokens import TokenEstimator, get_estimator
from .formats import EvalQuestion

__all__ = ["ANSWER_SYSTEM", "Judgement", "ModelJudge", "judge_prompt"]

ANSWER_SYSTEM = (
    "You answer questions about a long conversation from the context you are given. "
    "Answer in one short sentence. If the context does not say, answer that you do not know."
)
_PLAIN = (
    "I will give you a question, a correct answer, and a response from a model. Please "
    "answer yes if the response contains the correct answer. Otherwise, answer no. If the "
    "response is equivalent to the correct answer or contains all the intermediate steps "
    "to get the correct answer, you should also answer yes. If the response only contains "
    "a subset of the information required by the answer, answer no."
)
_TEMPORAL = (
    _PLAIN + " In addition, do not penalize off-by-one errors for the number of days. If the "
    "question asks for the number of days/weeks/months, etc., and the model makes "
    "off-by-one errors (e.g., predicting 19 days when the answer is 18), the model's "
    "response is still correct."
)
_UPDATE = (
    _PLAIN + " If the response contains some previous information along with an updated "
    "answer, the response should be considered as correct as long as the updated answer "
    "is the required answer."
)
_PREFERENCE = (
    "I will give you a question, a rubric for desired personalized response, and a response "
    "from a model. Please answer yes if the response satisfies the desired response. "
    "Otherwise, answer no. The model does not need to reflect all the points in the rubric. "
    "The response is correct as long as it recalls and utilizes the user's personal "
    "information correctly."
)
_ABSTENTION = (
    "I will give you an unanswerable question, an explanation, and a response from a model. "
    "Please answer yes if the model correctly identifies the question as unanswerable. The "
    "model could say that the information is incomplete, or some other information is "
    "given but the asked information is not."
)


def judge_prompt(question: EvalQuestion, response: str) -> str:
    """The judge's prompt for ``response`` to ``question``."""
    if question.abstention:
        head, label = _ABSTENTION, "Explanation"
    elif question.category in ("temporal", "temporal-reasoning"):
        head, label = _TEMPORAL, "Correct Answer"
    elif question.category == "knowledge-update":
        head, label = _UPDATE, "Correct Answer"
    elif question.category == "single-session-preference":
        head, label = _PREFERENCE, "Rubric"
    else:
        head, label = _PLAIN, "Correct Answer"
    return (
        f"{head}\n\nQuestion: {question.question}\n\n{label}: {question.answer}\n\n"
        f"Model Response: {response}\n\nIs the model response correct? Answer yes or no only."
    )


@dataclass(frozen=True)
class Judgement:
    answer: str
    correct: bool
    context_tokens: int

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "correct": self.correct,
            "contextTokens": self.context_tokens,
        }


class ModelJudge:
    """Answers with a context, then judges the answer, with one model."""

    def __init__(
        self, provider: Provider, model: str, *, estimator: TokenEstimator | None = None
    ) -> None:
        self.provider = provider
        self.model = model
        self.estimator = estimator or get_estimator()

    async def _complete(self, system: str, prompt: str) -> str:
        request = ProviderRequest(
            system=system,
            messages=[ProviderMessage("user", prompt)],
            model=self.model,
            correlation_id="prism-om-eval",
        )
        parts: list[str] = []
        async with event_stream(self.provider, request) as events:
            async for event in events:
                if isinstance(event, TextEvent):
                    parts.append(event.text)
        return "".join(parts).strip()

    async def assess(self, question: EvalQuestion, context: str) -> Judgement:
        """Answer ``question`` from ``context`` and judge the answer."""
        when = f"Today's date: {question.question_date[:10]}\n" if question.question_date else ""
        prompt = f"Context:\n{context}\n\n{when}Question: {question.question}\nAnswer:"
        answer = await self._complete(ANSWER_SYSTEM, prompt)
        verdict = await self._complete("", judge_prompt(question, answer))
        return Judgement(
            answer=answer,
            correct=verdict.lower().lstrip(" *\"'").startswith("yes"),
            context_tokens=self.estimator.count(ANSWER_SYSTEM) + self.estimator.count(prompt),
        )
