"""Observational-memory settings: nested groups, their defaults, and the removed flat keys.

:func:`resolve_observational_memory_settings` merges a settings mapping (as read from a
settings file, camelCase or snake_case, bare or wrapped as ``{"observational-memory": {...}}``)
and keyword overrides over the specification's defaults, and returns a frozen
:class:`ObservationalMemorySettings`.

The flat keys of releases before 0.0.19 (``observeAfterTokens``, ``keepRecentEntries``,
``workerModel``, ...) were removed in 0.1.5. Wherever they still appear they raise
:class:`~prism_om.errors.RemovedSettingError` (a ``TypeError``) naming the key and its nested
replacement, before anything else is looked at; :func:`reject_removed_settings` is the same
check for other factories' untyped option mappings.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainValidator,
    StrictBool,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel, to_snake
from pydantic_core import ErrorDetails, PydanticCustomError

from ..core.limits import (
    DEFAULT_MAX_WORKER_TURNS,
    MAX_SAFE_INTEGER,
    MAX_WORKER_TURNS_HARD_CAP,
    PAGE_LIMIT_DEFAULT,
    PAGE_LIMIT_HARD_CAP,
)
from ..errors import (
    AmbiguousInputError,
    InvalidInputError,
    LimitExceededError,
    PageTooLargeError,
    RemovedSettingError,
)
from ..tokens import DEFAULT_ENCODING

__all__ = [
    "DEFAULT_COMPACT_AFTER_TOKENS",
    "DEFAULT_DROPPER_POLICY",
    "DEFAULT_MESSAGE_TOKENS",
    "DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS",
    "DEFAULT_OBSERVATIONS_POOL_TARGET_TOKENS",
    "DEFAULT_OBSERVATION_TOKENS",
    "DEFAULT_RECENT_MESSAGES",
    "REFLECTION_BUDGET_SHARE",
    "REMOVED_SETTINGS",
    "SETTINGS_SECTION",
    "ContextSettings",
    "DropperPolicy",
    "DropperSettings",
    "ObservationSettings",
    "ObservationalMemorySettings",
    "ReflectionSettings",
    "RetrievalSettings",
    "WorkerSettings",
    "reject_removed_settings",
    "resolve_observational_memory_settings",
]

SETTINGS_SECTION: Final = "observational-memory"
"""The key under which a settings file holds this package's settings."""

DEFAULT_MESSAGE_TOKENS: Final = 10_000
DEFAULT_OBSERVATION_TOKENS: Final = 20_000
DEFAULT_COMPACT_AFTER_TOKENS: Final = 81_000
DEFAULT_RECENT_MESSAGES: Final = 8
DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS: Final = 20_000
DEFAULT_OBSERVATIONS_POOL_TARGET_TOKENS: Final = 10_000
DEFAULT_DROPPER_POLICY: Final = "model"
REFLECTION_BUDGET_SHARE: Final = 4
"""``reflection.budget_tokens`` defaults to ``context.observations_pool_max_tokens`` over this."""

DropperPolicy = Literal["model", "lowest-relevance"]


def _each_worker(key: str) -> str:
    return f"observation.{key}, reflection.{key} or dropper.{key}"


REMOVED_SETTINGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "observeAfterTokens": "observation.messageTokens",
        "reflectAfterTokens": "reflection.observationTokens",
        "compactAfterTokens": "context.compactAfterTokens",
        "keepRecentEntries": "context.recentMessages",
        "recentMessageMaxTokens": "context.recentMessageMaxTokens",
        "observationsPoolMaxTokens": "context.observationsPoolMaxTokens",
        "observationsPoolTargetTokens": "context.observationsPoolTargetTokens",
        "workerModel": _each_worker("model"),
        "workerProvider": _each_worker("provider"),
        "thinkingLevel": _each_worker("thinkingLevel"),
        "requireExplicitModel": _each_worker("requireExplicitModel"),
    }
)
"""Removed flat key (camelCase) -> its nested replacement (camelCase)."""


def _snake_path(path: str) -> str:
    # "observation.messageTokens, reflection.x or ..." -> the same words in snake_case.
    return " ".join(
        ".".join(to_snake(part) for part in word.split(".")) if "." in word else word
        for word in path.split(" ")
    )


# Every spelling of a removed key, mapped to its replacement in the same spelling style, so
# that a Python caller who wrote ``keep_recent_entries`` is told ``context.recent_messages``.
_REMOVED_LOOKUP: Final[Mapping[str, str]] = MappingProxyType(
    {
        **REMOVED_SETTINGS,
        **{to_snake(key): _snake_path(repl) for key, repl in REMOVED_SETTINGS.items()},
    }
)


def _removed_message(key: str, where: str) -> str:
    replacement = _REMOVED_LOOKUP[key]
    note = ""
    if key == "observationsPoolTargetTokens":
        note = " (which feeds dropper.targetTokens)"
    elif key == "observations_pool_target_tokens":
        note = " (which feeds dropper.target_tokens)"
    return f"{where}: setting {key!r} was removed in 0.1.5; use {replacement}{note} instead"


def reject_removed_settings(options: Mapping[str, Any], *, where: str) -> None:
    """Raise ``RemovedSettingError`` if ``options`` carries a removed pre-0.1.5 flat key.

    Checks the top level of ``options`` and, when present, its ``"observational-memory"``
    section, in camelCase and snake_case. ``where`` names the options in the message (for
    example ``"create_observational_memory()"``). Every removed key found is named, each with
    its replacement. Call it on untyped option mappings before doing anything else with
    them; do not call it on provider-request overrides, where a ``thinking_level`` is valid.
    """
    if not isinstance(options, Mapping):
        return
    problems = [_removed_message(key, where) for key in options if key in _REMOVED_LOOKUP]
    section = options.get(SETTINGS_SECTION)
    if isinstance(section, Mapping):
        inner = f"{where}[{SETTINGS_SECTION!r}]"
        problems += [_removed_message(key, inner) for key in section if key in _REMOVED_LOOKUP]
    if problems:
        raise RemovedSettingError("; ".join(problems))


# --- field types -----------------------------------------------------------------------


def _positive_int(value: Any) -> int:
    # Strict on purpose: a bool is an int in Python and "20000" or 2e4 in a settings file is a
    # typo more often than an intent; the specification asks for positive safe integers.
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError(
            "positive_int", "must be a positive integer, got {value}", {"value": repr(value)}
        )
    if value <= 0 or value > MAX_SAFE_INTEGER:
        raise PydanticCustomError(
            "positive_int",
            "must be a positive safe integer (1 to 2**53 - 1), got {value}",
            {"value": repr(value)},
        )
    return value


def _page_limit(value: Any) -> int:
    limit = _positive_int(value)
    if limit > PAGE_LIMIT_HARD_CAP:
        raise PydanticCustomError(
            "page_too_large",
            "{value} exceeds the page hard cap of {cap}",
            {"value": limit, "cap": PAGE_LIMIT_HARD_CAP},
        )
    return limit


def _agent_turns(value: Any) -> int:
    turns = _positive_int(value)
    if turns > MAX_WORKER_TURNS_HARD_CAP:
        raise PydanticCustomError(
            "limit_exceeded",
            "{value} exceeds the worker turns hard cap of {cap}",
            {"value": turns, "cap": MAX_WORKER_TURNS_HARD_CAP},
        )
    return turns


def _non_empty_str(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PydanticCustomError(
            "non_empty_string", "must be a non-empty string, got {value}", {"value": repr(value)}
        )
    return value


def _id_or_object(value: Any) -> Any:
    # A settings file names a model or provider by id; the runtime may hand over the objects
    # themselves. Only the string form can be checked here.
    if isinstance(value, str):
        return _non_empty_str(value)
    return value


def _credential(value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    return _non_empty_str(value)


PositiveInt = Annotated[int, PlainValidator(_positive_int)]
PageLimit = Annotated[int, PlainValidator(_page_limit)]
AgentTurns = Annotated[int, PlainValidator(_agent_turns)]
NonEmptyStr = Annotated[str, PlainValidator(_non_empty_str)]
IdOrObject = Annotated[Any, PlainValidator(_id_or_object)]
Credential = Annotated[bool | str, PlainValidator(_credential)]


class _Settings(BaseModel):
    """Base of every settings group: snake_case attributes, camelCase aliases, no extras."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


class WorkerSettings(_Settings):
    """The worker configuration that observer, reflector and dropper each carry."""

    model: IdOrObject = None
    """A model id (settings files) or a host model object; ``None`` falls back to the
    session model unless ``require_explicit_model``."""
    provider: IdOrObject = None
    """A provider id (settings files) or a provider object passed by the runtime."""
    instructions: NonEmptyStr | None = None
    """Extra instructions appended to the worker's system prompt."""
    thinking_level: NonEmptyStr | None = None
    """Thinking level passed with every provider request of this worker."""
    require_explicit_model: StrictBool = False
    """Skip the worker (``missing_model``) instead of falling back to the session model."""
    credential: Credential | None = None
    """Request a credential before running: a provider id, or ``True`` for the resolved
    model's provider id. ``None``/``False`` request none."""


class ObservationSettings(WorkerSettings):
    """The observer: runs once ``message_tokens`` of unscanned messages have accumulated,
    and shows a model at most that many message tokens per run (a larger backlog, such as
    a bulk import, is observed in chunks, each recorded with its own coverage)."""

    message_tokens: PositiveInt = DEFAULT_MESSAGE_TOKENS


class ReflectionSettings(WorkerSettings):
    """The reflector: runs once ``observation_tokens`` of unreflected observations exist.

    ``budget_tokens`` caps the text of the active reflections: above it, a consolidating
    pass writes reflections that supersede the oldest ones, down to half of it (see
    ``prism_om.workers.consolidator``). It defaults to a quarter of
    ``context.observations_pool_max_tokens`` when not set explicitly (it then stays out
    of ``model_fields_set``), so that reflections and observations together fit the
    rendered memory's cap.
    """

    observation_tokens: PositiveInt = DEFAULT_OBSERVATION_TOKENS
    budget_tokens: PositiveInt = DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS // REFLECTION_BUDGET_SHARE


class DropperSettings(WorkerSettings):
    """The dropper: shrinks the active observation pool down to ``target_tokens``.

    ``target_tokens`` defaults to ``context.observations_pool_target_tokens`` when it is not
    set explicitly (it then stays out of ``model_fields_set``).
    """

    policy: DropperPolicy = DEFAULT_DROPPER_POLICY
    target_tokens: PositiveInt = DEFAULT_OBSERVATIONS_POOL_TARGET_TOKENS


class ContextSettings(_Settings):
    """What the provider context and compaction keep."""

    compact_after_tokens: PositiveInt = DEFAULT_COMPACT_AFTER_TOKENS
    recent_messages: PositiveInt = DEFAULT_RECENT_MESSAGES
    recent_message_max_tokens: PositiveInt | None = None
    observations_pool_max_tokens: PositiveInt = DEFAULT_OBSERVATIONS_POOL_MAX_TOKENS
    observations_pool_target_tokens: PositiveInt = DEFAULT_OBSERVATIONS_POOL_TARGET_TOKENS


class RetrievalSettings(_Settings):
    """Raw-source recall paging."""

    page_limit: PageLimit = PAGE_LIMIT_DEFAULT


class ObservationalMemorySettings(_Settings):
    """Resolved observational-memory settings; build with
    :func:`resolve_observational_memory_settings`."""

    observation: ObservationSettings = ObservationSettings()
    reflection: ReflectionSettings = ReflectionSettings()
    dropper: DropperSettings = DropperSettings()
    context: ContextSettings = ContextSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    agent_max_turns: AgentTurns = DEFAULT_MAX_WORKER_TURNS
    passive: StrictBool = False
    """Record memory but inject no context blocks."""
    debug_log: StrictBool = False
    """Send the runtime's events to the debug sink."""
    token_encoding: NonEmptyStr = DEFAULT_ENCODING

    @model_validator(mode="after")
    def _derive_reflection_budget(self) -> ObservationalMemorySettings:
        if "budget_tokens" in self.reflection.model_fields_set:
            return self
        budget = max(self.context.observations_pool_max_tokens // REFLECTION_BUDGET_SHARE, 1)
        reflection = ReflectionSettings.model_construct(
            _fields_set=set(self.reflection.model_fields_set),
            **{**dict(self.reflection), "budget_tokens": budget},
        )
        # Frozen, like the dropper target below: set during validation only.
        object.__setattr__(self, "reflection", reflection)
        return self

    @model_validator(mode="after")
    def _derive_dropper_target(self) -> ObservationalMemorySettings:
        if "target_tokens" in self.dropper.model_fields_set:
            return self
        dropper = DropperSettings.model_construct(
            _fields_set=set(self.dropper.model_fields_set),
            **{**dict(self.dropper), "target_tokens": self.context.observations_pool_target_tokens},
        )
        # The model is frozen; this runs during validation, before anyone can hold it.
        object.__setattr__(self, "dropper", dropper)
        return self


# --- resolution ------------------------------------------------------------------------

_M = TypeVar("_M", bound=BaseModel)


def _field_names(model: type[BaseModel]) -> dict[str, str]:
    """Every accepted spelling of ``model``'s fields (name and alias) -> field name."""
    names: dict[str, str] = {}
    for name, field in model.model_fields.items():
        names[name] = name
        if field.alias:
            names[field.alias] = name
    return names


def _group_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    annotation = model.model_fields[name].annotation
    if isinstance(annotation, type) and issubclass(annotation, _Settings):
        return annotation
    return None


def _set_fields(instance: BaseModel) -> dict[str, Any]:
    # Only what was set, read attribute by attribute: a dump would serialise provider objects,
    # and unset fields must stay unset so a derived dropper.target_tokens is derived again.
    data: dict[str, Any] = {}
    for name in instance.model_fields_set:
        value = getattr(instance, name)
        data[name] = _set_fields(value) if isinstance(value, _Settings) else value
    return data


def _normalize(model: type[BaseModel], data: Mapping[Any, Any], path: str) -> dict[str, Any]:
    """``data`` with every key spelled as its snake_case field name, groups recursively.

    Unknown keys and a field given under both its spellings fail here, with the key path,
    rather than as a generic validation error.
    """
    names = _field_names(model)
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        if not isinstance(key, str) or key not in names:
            known = ", ".join(model.model_fields)
            hint = ""
            if key in _REMOVED_LOOKUP:
                # A removed flat key pushed down into a group by a half-done migration.
                hint = f"; {key!r} is a removed flat key, use {_REMOVED_LOOKUP[key]}"
            raise InvalidInputError(
                f"unknown observational-memory setting {where!r} "
                f"(known here, in snake_case or camelCase: {known}){hint}"
            )
        name = names[key]
        if name in spelled:
            raise AmbiguousInputError(
                f"observational-memory setting given twice: {spelled[name]!r} and {key!r}"
                f"{' in ' + path if path else ''}; pass only one"
            )
        spelled[name] = key
        group = _group_model(model, name)
        if group is not None:
            if value is None:
                continue  # JSON null for a whole group means "all defaults"
            if isinstance(value, group):
                value = _set_fields(value)
            elif not isinstance(value, Mapping):
                raise InvalidInputError(
                    f"observational-memory setting {where!r} must be a mapping, "
                    f"got {type(value).__name__}"
                )
            value = _normalize(group, value, f"{path}.{name}" if path else name)
        out[name] = value
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on ``base`` (both normalized): groups merge key by key, the rest replace."""
    merged = dict(base)
    for key, value in over.items():
        if _group_model(ObservationalMemorySettings, key) is not None and key in merged:
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _display(loc: tuple[int | str, ...]) -> str:
    snake = ".".join(str(part) for part in loc)
    camel = ".".join(to_camel(part) if isinstance(part, str) else str(part) for part in loc)
    return snake if snake == camel else f"{snake} ({camel})"


def _translate(exc: ValidationError) -> InvalidInputError:
    errors: list[ErrorDetails] = exc.errors(include_url=False)
    message = "invalid observational-memory settings: " + "; ".join(
        f"{_display(err['loc'])}: {err['msg']}" for err in errors
    )
    kinds = {err["type"] for err in errors}
    if kinds == {"page_too_large"}:
        return PageTooLargeError(message)
    if kinds == {"limit_exceeded"}:
        return LimitExceededError(message)
    return InvalidInputError(message)


def _validate(model: type[_M], data: Mapping[str, Any]) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _translate(exc) from exc


def _unwrap(settings: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """The observational-memory section of ``settings``: the wrapped section, or itself."""
    if SETTINGS_SECTION not in settings:
        return settings
    # A whole settings file may hold other packages' sections beside ours; those are not
    # ours to judge. One of our own keys beside the section would be silently ignored, so
    # that is refused instead.
    own = _field_names(ObservationalMemorySettings)
    stray = [key for key in settings if key in own]
    if stray:
        raise AmbiguousInputError(
            f"settings hold both a {SETTINGS_SECTION!r} section and top-level "
            f"observational-memory keys {stray}; put them all in the section"
        )
    section = settings[SETTINGS_SECTION]
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise InvalidInputError(
            f"settings[{SETTINGS_SECTION!r}] must be a mapping, got {type(section).__name__}"
        )
    return section


def resolve_observational_memory_settings(
    settings: Mapping[str, Any] | ObservationalMemorySettings | None = None,
    **overrides: Any,
) -> ObservationalMemorySettings:
    """Merge ``settings`` and ``overrides`` over the defaults and validate the result.

    ``settings`` is a mapping as read from a settings file (camelCase or snake_case keys,
    bare or wrapped as ``{"observational-memory": {...}}``), an already resolved
    :class:`ObservationalMemorySettings`, or ``None`` for the defaults. ``overrides`` are
    merged deeply on top: a group name with a mapping or group model
    (``context={"recent_messages": 4}``) updates only the keys it names; a top-level name
    (``passive=True``) replaces the value. An override of ``None`` counts as not given.

    ``dropper.target_tokens`` follows ``context.observations_pool_target_tokens`` unless set;
    ``reflection.budget_tokens`` is a quarter of ``context.observations_pool_max_tokens``
    unless set.

    Raises ``RemovedSettingError`` (a ``TypeError``) for a removed flat key anywhere, before
    anything else; ``InvalidInputError`` for unknown keys and invalid values (naming the key
    path); ``AmbiguousInputError`` for a key given in both spellings;
    ``PageTooLargeError`` / ``LimitExceededError`` above a hard cap.
    """
    reject_removed_settings(overrides, where="overrides")
    if isinstance(settings, Mapping):
        reject_removed_settings(settings, where="settings")

    base: dict[str, Any]
    if settings is None:
        base = {}
    elif isinstance(settings, ObservationalMemorySettings):
        base = _set_fields(settings)
    elif isinstance(settings, Mapping):
        base = _normalize(ObservationalMemorySettings, _unwrap(settings), "")
    else:
        raise InvalidInputError(
            "settings must be a mapping, ObservationalMemorySettings or None, "
            f"got {type(settings).__name__}"
        )

    given = {key: value for key, value in overrides.items() if value is not None}
    merged = _merge(base, _normalize(ObservationalMemorySettings, given, ""))
    return _validate(ObservationalMemorySettings, merged)
