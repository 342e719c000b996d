"""The Anthropic provider: one Messages API call per turn, answered by a tool call.

The model calls ``record_memory_operations`` with an object whose
``operations`` array follows a JSON schema, so the answer is JSON by
construction; a plain text answer is still accepted and parsed tolerantly.

The request is valid for every model a user may set in ``MDMEM_MODEL``
(:func:`request_rules`). It never sends a thinking setting or a sampling
parameter. Where a model does not think unless asked (Claude Haiku 5.5 and the
4.x models), the tool is forced (``tool_choice: {"type": "tool"}``). Where a
model thinks by default, forcing is refused (Anthropic's "Claude Sonnet 5.5
migration guide": forced tool choice, ``thinking: {"type": "disabled"}``,
thinking budgets and sampling parameters return a 400; "What's new in Claude
Opus 5.5": thinking can't be disabled and forced tool use returns an error),
so the request asks with ``tool_choice: {"type": "auto"}`` and the prompt
tells the model to call the tool. A model this module does not know that
refuses the forced tool with a 400 is asked again once with ``auto``, and
the provider remembers it.

``anthropic`` is imported when the first turn is processed, never at import
time: it costs over a second, and ``mdmem index`` runs at every session start.
The SDK reads ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_AUTH_TOKEN`` and
``ANTHROPIC_BASE_URL``; this module translates its errors into
:class:`~mdmem.errors.ProviderError`, saying whether a later try may help.

The fixed instructions, then the memory the session sees, go in two system
blocks, each marked for prompt caching (``cache_control: ephemeral``): both are
the same from turn to turn (the memory until a turn changes the prompt block),
so a call within a few minutes of the last reads them from the cache at a
tenth of the price, when the prefix is above the model's minimum (1,024 to
4,096 tokens; see docs/concepts/worker.md). The tokens of each call (input,
output, cache reads and writes) are kept in
:attr:`AnthropicProvider.last_usage` for the usage ledger.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mdmem._kinds import Level, NoteType
from mdmem.errors import ProviderError
from mdmem.extract.providers.base import Usage

if TYPE_CHECKING:
    from mdmem.extract.providers.base import Answer, ExtractionRequest

__all__ = [
    "DEFAULT_MODEL",
    "TOOL_NAME",
    "AnthropicProvider",
    "RequestRules",
    "operations_schema",
    "request_rules",
    "system_blocks",
    "usage_of",
]

DEFAULT_MODEL = "claude-haiku-5-5"
TOOL_NAME = "record_memory_operations"
# Status codes for which trying the same request later can succeed.
_RETRYABLE_STATUS = {408, 409, 429}


@dataclass(frozen=True)
class RequestRules:
    """How to ask a model for the tool call."""

    force_tool: bool
    """Send ``tool_choice: {"type": "tool"}`` (only where the model does not think by default)."""
    reason: str


_MODEL = re.compile(
    r"claude-(?P<family>opus|sonnet|haiku|fable|mythos)-(?P<major>\d+)(?:-(?P<minor>\d{1,2})\b)?"
)


def request_rules(model: str) -> RequestRules:
    """What the request must look like for ``model`` (a Claude API, Bedrock or Vertex id).

    From Anthropic's pages: Claude Sonnet 5.5, Opus 5.5, Fable and Mythos think
    by default and refuse forced tool use; Sonnet 5 and Opus 5 think by
    default too (a forced tool would need thinking turned off). Claude Haiku
    5.5 and every 4.x and 3.x model think only when asked, so forcing is valid.
    A name that is not a Claude model (a proxy's alias) is forced; a refusal
    falls back to ``auto`` (see the module docstring).
    """
    m = _MODEL.search(model.lower())
    if m is None:
        return RequestRules(True, "not a Claude model name: forced, auto if refused")
    family, major = m.group("family"), int(m.group("major"))
    minor = int(m.group("minor") or 0)
    if family in ("fable", "mythos"):
        return RequestRules(False, f"Claude {family.title()} thinks by default")
    if major < 5:
        return RequestRules(True, "thinks only when asked")
    if family == "haiku" and (major, minor) <= (5, 5):
        return RequestRules(True, "Claude Haiku 5.5 thinks only when asked")
    return RequestRules(False, f"Claude {family.title()} {major}.{minor} thinks by default")


def operations_schema() -> dict[str, object]:
    """The JSON schema of the tool's input: ``{"operations": [...]}``."""
    operation = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["create", "update", "delete"]},
            "level": {"type": "string", "enum": [level.value for level in Level]},
            "type": {"type": "string", "enum": [t.value for t in NoteType]},
            "title": {"type": "string", "description": "Short title, under 60 characters."},
            "summary": {"type": "string", "description": "One sentence."},
            "content": {"type": "string", "description": "The note's Markdown body."},
            "filename": {
                "type": "string",
                "description": "For update and delete: a file name from the existing memory.",
            },
            "supersedes": {
                "type": "array",
                "items": {"type": "string"},
                "description": "For create and update: file names of notes this one replaces.",
            },
            "expires": {
                "type": "string",
                "description": "For task-state notes: the ISO date after which it is obsolete.",
            },
        },
        "required": ["action", "level"],
    }
    return {
        "type": "object",
        "properties": {"operations": {"type": "array", "items": operation}},
        "required": ["operations"],
    }


class AnthropicProvider:
    """Extraction through the Anthropic Messages API."""

    name = "anthropic"

    def __init__(
        self,
        model: str | None = None,
        *,
        max_tokens: int = 4096,
        timeout: float = 60.0,
        max_retries: int = 2,
        stream: bool | None = None,
        client: Any = None,
    ) -> None:
        self.model = model or os.environ.get("MDMEM_MODEL") or DEFAULT_MODEL
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        if stream is None:
            stream = os.environ.get("MDMEM_STREAM", "").lower() in ("1", "true", "yes")
        self.stream = stream
        self._client = client
        self.last_usage: Usage | None = None
        self.rules = request_rules(self.model)

    def _get_client(self) -> Any:
        if self._client is None:
            import anthropic

            self._client = anthropic.Anthropic(timeout=self.timeout, max_retries=self.max_retries)
        return self._client

    def close(self) -> None:
        """Close the HTTP client and its pooled connections."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def extract(self, request: ExtractionRequest) -> Answer:
        """Ask the model for this turn's operations.

        Raises:
            ProviderError: the API could not be reached, refused, or failed.
        """
        self.last_usage = None
        try:
            message = self._send(self._request(request, force=self.rules.force_tool))
        except Exception as exc:
            if not (self.rules.force_tool and _refuses_forcing(exc)):
                raise _translate(exc) from exc
            # A model we do not know refuses the forced tool: ask it the way
            # thinking models are asked, from now on.
            self.rules = RequestRules(False, f"the API refused a forced tool: {exc}"[:200])
            try:
                message = self._send(self._request(request, force=False))
            except Exception as again:
                raise _translate(again) from again
        self.last_usage = usage_of(message, self.model)
        return _answer_of(message)

    def _request(self, request: ExtractionRequest, *, force: bool) -> dict[str, Any]:
        """The Messages API arguments: no thinking setting, no sampling parameter, ever."""
        description = (
            "Record the memory operations for this turn (an empty list when nothing is "
            "worth keeping)."
        )
        if not force:
            description += " Always answer by calling this tool exactly once."
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system_blocks(request),
            "messages": [{"role": "user", "content": request.prompt}],
            "tools": [
                {"name": TOOL_NAME, "description": description, "input_schema": operations_schema()}
            ],
            "tool_choice": {"type": "tool", "name": TOOL_NAME} if force else {"type": "auto"},
        }

    def _send(self, kwargs: dict[str, Any]) -> Any:
        client = self._get_client()
        if self.stream:
            with client.messages.stream(**kwargs) as stream:
                return stream.get_final_message()
        return client.messages.create(**kwargs)

    def ask(self, system: str, prompt: str, *, max_tokens: int = 2048) -> str:
        """A plain question to the model, answered in text (for ``eval recall --questions model``).

        Raises:
            ProviderError: the API could not be reached, refused, or failed.
        """
        self.last_usage = None
        try:
            message = self._get_client().messages.create(
                model=self.model,
                max_tokens=max_tokens,
                system=system,
                messages=[{"role": "user", "content": prompt}],
            )
        except Exception as exc:
            raise _translate(exc) from exc
        self.last_usage = usage_of(message, self.model)
        answer = _answer_of(message)
        return answer if isinstance(answer, str) else ""


def system_blocks(request: ExtractionRequest) -> list[dict[str, Any]]:
    """The system prompt as blocks, each stable part ending in a cache breakpoint.

    The instructions never change; the memory changes only when a turn
    changes what the prompt block shows. A breakpoint after each lets a call
    reuse the longest prefix it shares with an earlier one. A prefix under
    the model's minimum (see docs/concepts/worker.md) is simply not cached.
    """
    mark = {"type": "ephemeral"}
    blocks: list[dict[str, Any]] = [{"type": "text", "text": request.system, "cache_control": mark}]
    if request.memory:
        blocks.append({"type": "text", "text": request.memory, "cache_control": mark})
    return blocks


def usage_of(message: Any, model: str = "") -> Usage | None:
    """The tokens a Messages API response reports, or None when it reports none."""
    usage = getattr(message, "usage", None)
    if usage is None:
        return None

    def count(name: str) -> int:
        value = getattr(usage, name, None)
        return value if isinstance(value, int) and value > 0 else 0

    return Usage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_read_tokens=count("cache_read_input_tokens"),
        cache_write_tokens=count("cache_creation_input_tokens"),
        model=str(getattr(message, "model", None) or model),
    )


def _answer_of(message: Any) -> Answer:
    texts: list[str] = []
    for block in getattr(message, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "tool_use" and getattr(block, "name", None) == TOOL_NAME:
            value = getattr(block, "input", None)
            if isinstance(value, (dict, list)):
                return value
        if kind == "text":
            texts.append(str(getattr(block, "text", "")))
    if getattr(message, "stop_reason", None) == "max_tokens":
        raise ProviderError("the answer was cut off at max_tokens", raw="".join(texts))
    return "".join(texts)


def _refuses_forcing(exc: Exception) -> bool:
    """Whether ``exc`` is the API's 400 for a forced tool (or thinking with a forced tool)."""
    import anthropic

    if not isinstance(exc, anthropic.BadRequestError):
        return False
    text = str(getattr(exc, "message", "") or exc).lower()
    return "tool_choice" in text or "forc" in text


def _translate(exc: Exception) -> ProviderError:
    """An SDK or transport error as a ProviderError that says whether to try again."""
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        retryable = status in _RETRYABLE_STATUS or status >= 500 or status == 200
        return ProviderError(f"Anthropic API error {status}: {exc.message}", retryable=retryable)
    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        return ProviderError(f"cannot reach the Anthropic API: {exc}", retryable=True)
    if isinstance(exc, TypeError) and "authentication" in str(exc).lower():
        return ProviderError(
            "no Anthropic credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), "
            "or use the offline provider (MDMEM_PROVIDER=offline)",
            retryable=False,
        )
    if isinstance(exc, anthropic.AnthropicError):
        return ProviderError(f"Anthropic SDK error: {exc}", retryable=True)
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in (
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
    ):
        # Errors in the middle of a stream come from the transport, untranslated by the SDK.
        return ProviderError(f"connection to the Anthropic API failed: {exc!r}", retryable=True)
    return ProviderError(f"unexpected error from the Anthropic SDK: {exc!r}", retryable=True)
