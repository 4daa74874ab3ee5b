"""``python -m bench.observer_requests``: how a bulk import reaches a model's observer.

Imports a synthetic OpenAI-format chat of ``--entries`` messages (no times, about 225
bytes each, seeded), runs one forced observer flush with the offline provider standing in
for a model, and prints the observer's requests: how many, and the bytes of each as the
OpenAI-compatible provider would send it (compact JSON body of the first turn of each run,
and of every turn). Nothing is timed; the figures depend only on the code and the seed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

from prism_om.importers import import_conversation
from prism_om.providers.base import ProviderEvent, ProviderRequest
from prism_om.providers.openai_compat import OpenAICompatibleProvider
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime

NAMES = ("Melanie", "Caroline", "Jon", "Gina", "Tim", "Audrey")
THINGS = ("a pottery class", "the charity run", "a camping trip", "the art show", "a new job")
WHEN = ("last Friday", "on 20 July 2023", "next week", "yesterday", "in two weeks")


def conversation(count: int, seed: int = 18) -> list[dict[str, str]]:
    """``count`` alternating user/assistant messages of a few statements each."""
    rng = random.Random(seed)
    messages = []
    for index in range(count):
        a, b = rng.sample(NAMES, 2)
        text = (
            f"{a} told {b} about {rng.choice(THINGS)} {rng.choice(WHEN)}. "
            f"It cost {rng.randint(10, 500)} dollars and took {rng.randint(1, 9)} hours. "
            f"{b} said they would bring {rng.randint(2, 12)} friends and {rng.choice(THINGS)}."
        )
        messages.append({"role": "user" if index % 2 == 0 else "assistant", "content": text})
    return messages


class Measuring:
    """A provider that answers like ``inner`` and keeps the wire size of every request."""

    def __init__(self) -> None:
        self.inner = OfflineMemoryProvider()
        self.provider_id = self.inner.provider_id
        self._wire = OpenAICompatibleProvider("http://127.0.0.1:9/v1", "observer-model")
        self.sizes: list[int] = []
        self.first_turns: list[int] = []

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        body = self._wire.build_body(request)
        size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
        self.sizes.append(size)
        if len(request.messages) == 1:  # a run's first turn: the prompt with its sources
            self.first_turns.append(size)
        async for event in self.inner.generate(request):
            yield event

    async def aclose(self) -> None:
        await self._wire.aclose()


async def measure(entries: int, message_tokens: int | None) -> dict[str, object]:
    provider = Measuring()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chat.json"
        path.write_text(json.dumps(conversation(entries)), encoding="utf-8")
        transcript_bytes = path.stat().st_size
        store = MemoryStore()
        result = await import_conversation(store, path, session_id="chat")
        session = Session(store, result.session_id)
        observation: dict[str, object] = {"provider": provider, "model": "observer-model"}
        if message_tokens is not None:
            observation["message_tokens"] = message_tokens
        runtime = create_observational_memory_runtime(
            session=session, append_entry=session.append, observation=observation
        )
        flushed = await runtime.flush(force=True)
        outcome = flushed.outcome("observer")
        await store.close()
    await provider.aclose()
    runs = provider.first_turns
    return {
        "entries": entries,
        "transcriptBytes": transcript_bytes,
        "observer": f"{outcome.status} {outcome.reason or ''}".strip() if outcome else None,
        "observerRuns": outcome.runs if outcome else 0,
        "requests": len(provider.sizes),
        "runFirstRequestBytes": {"max": max(runs), "mean": sum(runs) // len(runs)},
        "allRequestBytes": {"max": max(provider.sizes), "total": sum(provider.sizes)},
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.observer_requests", description=__doc__)
    parser.add_argument("--entries", type=int, default=369)
    parser.add_argument(
        "--message-tokens", type=int, default=None, help="observation.message_tokens"
    )
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(args.entries, args.message_tokens))
    json.dump(figures, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
