"""The OpenAI-compatible provider: one Chat Completions call per turn.

For OpenAI itself and for local or hosted servers that speak its API (Ollama,
LM Studio, vLLM, llama.cpp's server). Needs mdmem's ``openai`` extra;
the ``openai`` SDK is imported when the first turn is processed.

Configuration, from the environment:

* ``MDMEM_OPENAI_BASE_URL`` (else ``OPENAI_BASE_URL``, else OpenAI's own URL);
* ``MDMEM_MODEL`` (else :data:`DEFAULT_MODEL`);
* ``OPENAI_API_KEY``, optional for a local server (a placeholder is sent);
* ``MDMEM_OPENAI_MODE``: how to ask for structured output. ``tools`` (the
  default) forces a call of the ``record_memory_operations`` function;
  ``json_schema`` asks for a ``response_format`` with the operations' schema;
  ``text`` asks for nothing and parses the text tolerantly. A server that
  refuses the structured form (400/404/422 naming tools or response_format) is
  asked again once in ``text`` mode, and that choice is kept for the process.
* ``MDMEM_STREAM=1`` streams the answer (with ``include_usage``).

Errors become :class:`~mdmem.errors.ProviderError` as in the Anthropic
provider: connection errors, timeouts, 408/409/429 and 5xx are retryable; the
SDK itself retries ``max_retries`` times first. Token usage (prompt,
completion, cached prompt tokens) is kept in :attr:`OpenAIProvider.last_usage`.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from mdmem.errors import ProviderError
from mdmem.extract.providers.anthropic import TOOL_NAME, operations_schema
from mdmem.extract.providers.base import Usage

if TYPE_CHECKING:
    from mdmem.extract.providers.base import Answer, ExtractionRequest

__all__ = ["DEFAULT_MODEL", "MODES", "OpenAIProvider"]

#: OpenAI's current small model, as the SDK's ChatModel list names it (gpt-4o-mini, the
#: default before, is a legacy model there): extraction is a short, cheap, structured job.
DEFAULT_MODEL = "gpt-5.4-mini"
MODES = ("tools", "json_schema", "text")
_RETRYABLE_STATUS = {408, 409, 429}
_UNSUPPORTED = ("tool", "function", "response_format", "json_schema", "schema", "not support")


class OpenAIProvider:
    """Extraction through an OpenAI-compatible Chat Completions API."""

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        mode: str | None = None,
        max_tokens: int = 4096,
        timeout: float = 60.0,
        max_retries: int = 2,
        stream: bool | None = None,
        client: Any = None,
    ) -> None:
        env = os.environ
        self.model = model or env.get("MDMEM_MODEL") or DEFAULT_MODEL
        self.base_url = base_url or env.get("MDMEM_OPENAI_BASE_URL") or env.get("OPENAI_BASE_URL")
        self.api_key = api_key or env.get("OPENAI_API_KEY") or None
        mode = (mode or env.get("MDMEM_OPENAI_MODE") or "tools").strip().lower()
        if mode not in MODES:
            raise ValueError(f"MDMEM_OPENAI_MODE: {mode!r} is not one of {', '.join(MODES)}")
        self.mode = mode
        self.max_tokens = max_tokens
        # OpenAI's own API wants max_completion_tokens (its reasoning models refuse
        # max_tokens); the compatible servers (vLLM, Ollama, llama.cpp) know max_tokens.
        # Whichever a server refuses, the other is tried once and kept.
        self.limit_param = "max_completion_tokens" if self.base_url is None else "max_tokens"
        self._limit_switched = False
        self.timeout = timeout
        self.max_retries = max_retries
        if stream is None:
            stream = env.get("MDMEM_STREAM", "").lower() in ("1", "true", "yes")
        self.stream = stream
        self._client = client
        self.last_usage: Usage | None = None

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError:
                from mdmem._install import extra_hint

                raise ProviderError(
                    f"the openai provider needs mdmem's openai extra: {extra_hint('openai')}",
                    retryable=False,
                ) from None
            if self.api_key is None and self.base_url is None:
                raise ProviderError(
                    "no OpenAI credentials: set OPENAI_API_KEY, or MDMEM_OPENAI_BASE_URL for "
                    "a local server",
                    retryable=False,
                )
            self._client = openai.OpenAI(
                api_key=self.api_key or "not-needed",  # local servers ignore it
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
            )
        return self._client

    def close(self) -> None:
        """Close the HTTP client and its pooled connections."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _kwargs(self, request: ExtractionRequest, mode: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            self.limit_param: self.max_tokens,
            "messages": [
                {"role": "system", "content": request.full_system},
                {"role": "user", "content": request.prompt},
            ],
        }
        if mode == "tools":
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": TOOL_NAME,
                        "description": "Record the memory operations for this turn (an empty "
                        "list when nothing is worth keeping).",
                        "parameters": operations_schema(),
                    },
                }
            ]
            kwargs["tool_choice"] = {"type": "function", "function": {"name": TOOL_NAME}}
        elif mode == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "memory_operations", "schema": operations_schema()},
            }
        if self.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    def extract(self, request: ExtractionRequest) -> Answer:
        """Ask the model for this turn's operations.

        Raises:
            ProviderError: the server could not be reached, refused, or failed.
        """
        self.last_usage = None
        client = self._get_client()
        try:
            try:
                return self._call(client, request, self.mode)
            except Exception as exc:
                if not self._limit_switched and _refuses_limit(exc, self.limit_param):
                    self._limit_switched = True
                    self.limit_param = _OTHER_LIMIT[self.limit_param]
                    return self.extract(request)
                if self.mode == "text" or not _refuses_structure(exc):
                    raise
            self.mode = "text"  # this server takes no structured output: ask plainly
            return self._call(client, request, "text")
        except ProviderError:
            raise
        except Exception as exc:
            raise _translate(exc) from exc

    def ask(self, system: str, prompt: str, *, max_tokens: int = 2048) -> str:
        """A plain question to the model, answered in text (for ``eval recall --questions model``).

        Raises:
            ProviderError: the server could not be reached, refused, or failed.
        """
        self.last_usage = None
        client = self._get_client()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": prompt},
            ],
        }
        for _ in range(2):
            kwargs[self.limit_param] = max_tokens
            try:
                response = client.chat.completions.create(**kwargs)
                break
            except Exception as exc:
                if self._limit_switched or not _refuses_limit(exc, self.limit_param):
                    raise _translate(exc) from exc
                del kwargs[self.limit_param]
                self._limit_switched = True
                self.limit_param = _OTHER_LIMIT[self.limit_param]
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise ProviderError("the server's answer is not a chat completion (no choices)")
        usage, model = getattr(response, "usage", None), getattr(response, "model", None)
        self.last_usage = _usage(usage, str(model or self.model))
        message = getattr(choices[0], "message", None)
        return str(getattr(message, "content", None) or "")

    def _call(self, client: Any, request: ExtractionRequest, mode: str) -> Answer:
        response = client.chat.completions.create(**self._kwargs(request, mode))
        if self.stream:
            text, arguments, finish, usage, model = _collect(response)
        else:
            choices = getattr(response, "choices", None)
            if not isinstance(choices, list) or not choices:
                raise ProviderError(
                    "the server's answer is not a chat completion (no choices)", retryable=True
                )
            choice = choices[0]
            message = getattr(choice, "message", None)
            text = str(getattr(message, "content", None) or "")
            arguments = [
                str(call.function.arguments or "")
                for call in getattr(message, "tool_calls", None) or []
                if getattr(call, "function", None) is not None and call.function.name == TOOL_NAME
            ]
            finish = getattr(choice, "finish_reason", None)
            usage, model = getattr(response, "usage", None), getattr(response, "model", None)
        self.last_usage = _usage(usage, str(model or self.model))
        for raw in arguments:
            try:
                value = json.loads(raw)
            except ValueError:
                text = text or raw  # the tolerant parser may still find the array
                continue
            if isinstance(value, (dict, list)):
                return value
        if finish == "length":
            raise ProviderError("the answer was cut off at max_tokens", raw=text or None)
        return text


def _collect(stream: Any) -> tuple[str, list[str], str | None, Any, str | None]:
    """Text, tool-call arguments, finish reason, usage and model of a streamed answer."""
    texts: list[str] = []
    calls: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    finish: str | None = None
    usage: Any = None
    model: str | None = None
    with stream:
        for chunk in stream:
            model = getattr(chunk, "model", None) or model
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
            for choice in getattr(chunk, "choices", None) or []:
                finish = getattr(choice, "finish_reason", None) or finish
                delta = getattr(choice, "delta", None)
                if delta is None:
                    continue
                if getattr(delta, "content", None):
                    texts.append(delta.content)
                for call in getattr(delta, "tool_calls", None) or []:
                    index = int(getattr(call, "index", 0) or 0)
                    function = getattr(call, "function", None)
                    if function is None:
                        continue
                    if getattr(function, "name", None):
                        names[index] = function.name
                    calls.setdefault(index, []).append(getattr(function, "arguments", None) or "")
    arguments = ["".join(parts) for i, parts in sorted(calls.items()) if names.get(i) == TOOL_NAME]
    return "".join(texts), arguments, finish, usage, model


def _usage(usage: Any, model: str) -> Usage | None:
    if usage is None:
        return None

    def count(obj: Any, name: str) -> int:
        value = getattr(obj, name, None)
        return value if isinstance(value, int) and value > 0 else 0

    details = getattr(usage, "prompt_tokens_details", None)
    cached = count(details, "cached_tokens")
    written = count(details, "cache_write_tokens")
    prompt = count(usage, "prompt_tokens")
    return Usage(
        # prompt_tokens includes the cached ones: count each token once.
        input_tokens=max(prompt - cached - written, 0),
        output_tokens=count(usage, "completion_tokens"),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        model=model,
    )


_OTHER_LIMIT = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}


def _refuses_limit(exc: Exception, param: str) -> bool:
    """Whether a 400 says this model takes the other name of the output-token limit."""
    if getattr(exc, "status_code", None) != 400:
        return False
    text = str(exc)
    return f"'{param}'" in text and "not supported" in text.lower()


def _refuses_structure(exc: Exception) -> bool:
    """Whether an error says the server does not take tools or response_format."""
    status = getattr(exc, "status_code", None)
    if status not in (400, 404, 422, 501):
        return False
    return any(word in str(exc).lower() for word in _UNSUPPORTED)


def _translate(exc: Exception) -> ProviderError:
    """An SDK or transport error as a ProviderError that says whether to try again."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in _RETRYABLE_STATUS or status >= 500
        return ProviderError(
            f"OpenAI-compatible API error {status}: {exc.message}", retryable=retryable
        )
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return ProviderError(f"cannot reach the OpenAI-compatible API: {exc}", retryable=True)
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderError(f"the server's answer is not a chat completion: {exc}", retryable=True)
    if isinstance(exc, openai.OpenAIError):
        return ProviderError(f"OpenAI SDK error: {exc}", retryable=True)
    if isinstance(exc, (OSError, ValueError, AttributeError, IndexError, TypeError)) or type(
        exc
    ).__module__.split(".")[0] in ("httpx", "httpcore"):
        # A garbled body or a break in the middle of a stream.
        return ProviderError(f"the OpenAI-compatible API failed: {exc!r}", retryable=True)
    return ProviderError(f"unexpected error from the OpenAI SDK: {exc!r}", retryable=True)
