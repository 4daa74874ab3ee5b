"""``Model``: the small typed description of a model that workers and hosts share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError

__all__ = ["Model", "coerce_model", "resolve_input_cap"]


@dataclass(frozen=True, slots=True)
class Model:
    """A model id, the provider id it belongs to, and its token budget when known."""

    id: str
    provider: str
    context_window: int | None = None
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InvalidInputError(f"a model needs a non-empty id, got {self.id!r}")
        if not isinstance(self.provider, str) or not self.provider.strip():
            raise InvalidInputError(f"model {self.id!r} needs a non-empty provider id")
        for name in ("context_window", "max_output_tokens"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise InvalidInputError(f"model {self.id!r}: {name} must be a positive integer")


def resolve_input_cap(model: Model) -> int:
    """The input tokens a request may use: context window minus the output reserve.

    Raises ``InvalidInputError`` when the model has no known context window, or when the
    output reserve leaves no room for input.
    """
    if model.context_window is None:
        raise InvalidInputError(
            f"model {model.id!r} has no known context_window; set one to resolve an input cap"
        )
    cap = model.context_window - (model.max_output_tokens or 0)
    if cap <= 0:
        raise InvalidInputError(
            f"model {model.id!r}: max_output_tokens ({model.max_output_tokens}) leaves no "
            f"input room in a context window of {model.context_window}"
        )
    return cap


def coerce_model(value: object, *, default_provider: str | None = None) -> Model | None:
    """A ``Model`` from a ``Model``, an id string, a mapping or a host model object.

    A bare id string takes ``default_provider`` (the worker provider's ``provider_id``).
    A mapping or object needs ``id``; ``provider`` falls back to ``default_provider``.
    """
    if value is None or isinstance(value, Model):
        return value
    if isinstance(value, str):
        return Model(id=value, provider=default_provider or "unknown")
    fields: Mapping[str, Any]
    if isinstance(value, Mapping):
        fields = value
    else:
        fields = {
            name: getattr(value, name)
            for name in ("id", "provider", "context_window", "max_output_tokens")
            if hasattr(value, name)
        }
    if "id" not in fields:
        raise InvalidInputError(f"cannot read a model (no id) from {type(value).__name__}")
    return Model(
        id=fields["id"],
        provider=fields.get("provider") or default_provider or "unknown",
        context_window=fields.get("context_window", fields.get("contextWindow")),
        max_output_tokens=fields.get("max_output_tokens", fields.get("maxOutputTokens")),
    )
