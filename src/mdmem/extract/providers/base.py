"""The seam between mdmem and a model: one small Protocol and the request it receives."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Protocol

__all__ = ["Answer", "ExtractionRequest", "Message", "Provider", "Usage"]

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
    """The user message: today's date, the notes related to the turn, the turn (``role=...``)."""
    messages: tuple[Message, ...]
    """The turn itself, redacted, for providers that do not call a model."""
    project_index: str
    user_index: str
    today: date
    memory: str = ""
    """The existing memory the session sees: after ``system``, before ``prompt``; stable across
    turns, so a provider that caches prompts marks the end of it (see ``prompt.build``)."""
    related: str = ""
    """The lines of the existing notes most related to this turn (also in ``prompt``)."""

    @property
    def full_system(self) -> str:
        """``system`` and ``memory`` as one text, for providers with a single system message."""
        return f"{self.system}\n\n{self.memory}" if self.memory else self.system


@dataclass(frozen=True)
class Usage:
    """The tokens one model call used, as the response reported them."""

    input_tokens: int = 0
    """Input tokens billed at the full rate (cache reads and writes not included)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model: str = ""

    @property
    def total(self) -> int:
        """Every token the model processed: what a daily budget counts."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class Provider(Protocol):
    """A model that turns one agent turn into memory operations.

    A provider that calls a model also sets ``last_usage`` (a :class:`Usage`)
    after each call, successful or not when the response said; the Manager
    records it in the usage ledger.
    """

    name: str

    def extract(self, request: ExtractionRequest) -> Answer:
        """Return the operations for this turn.

        Raises:
            ProviderError: the model could not be reached or refused; ``retryable``
                says whether trying again later may help.
        """
        ...
