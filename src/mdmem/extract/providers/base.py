"""The seam between mdmem and a model: one small Protocol and the request it receives."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Protocol

__all__ = ["Answer", "ExtractionRequest", "Message", "Provider"]

#: What a provider answers: a decoded JSON value (a list of operation objects,
#: or an object wrapping one) or raw text that still has to be parsed.
Answer = list[object] | dict[str, object] | str


@dataclass(frozen=True)
class Message:
    """One message of a turn, reduced to its role and text (already redacted)."""

    role: str
    text: str


@dataclass(frozen=True)
class ExtractionRequest:
    """Everything a provider may use to decide what is worth remembering from one turn."""

    system: str
    """Instructions for the model (the extraction prompt without the turn)."""
    prompt: str
    """The user message: current indexes, today's date, and the turn as ``role=...`` lines."""
    messages: tuple[Message, ...]
    """The turn itself, redacted, for providers that do not call a model."""
    project_index: str
    user_index: str
    today: date


class Provider(Protocol):
    """A model that turns one agent turn into memory operations."""

    name: str

    def extract(self, request: ExtractionRequest) -> Answer:
        """Return the operations for this turn.

        Raises:
            ProviderError: the model could not be reached or refused; ``retryable``
                says whether trying again later may help.
        """
        ...
