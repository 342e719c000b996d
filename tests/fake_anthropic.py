"""A local fake of the Anthropic Messages API, for tests that drive the real SDK.

A real HTTP server on 127.0.0.1 (an OS-chosen port) that the `anthropic`
client talks to through ``base_url``. A test scripts what the "model" answers,
in order; every request is recorded for assertions::

    script = [FakeAnthropic.tool_use("save", {"x": 1}), FakeAnthropic.text("done")]
    with FakeAnthropic(*script) as fake:
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.url, max_retries=0)
        ...
        assert fake.requests[0].body["tool_choice"] == {"type": "tool", "name": "save"}

What it serves:

- ``POST /v1/messages`` (also ``?beta=true`` and any ``anthropic-beta``
  header), as JSON or, with ``"stream": true``, as the SSE sequence the SDK
  parses: ``message_start``, ``ping``, then per block ``content_block_start``
  / ``content_block_delta`` (``text_delta``, ``input_json_delta``,
  ``thinking_delta`` + ``signature_delta``) / ``content_block_stop``, then
  ``message_delta`` (stop reason and usage) and ``message_stop``.
- Server-held message threads (``"thread": {"type": "create"}`` /
  ``{"type": "continue", "previous_message_id": ...}``), which the SDK's
  ``client.beta.messages.tool_runner`` uses by default: a ``continue`` only
  carries the new messages, and the fake fills in the history it holds, so a
  scripted callable always sees the whole conversation (``RecordedRequest.resolved``).
- ``POST /v1/messages/count_tokens`` (a rough estimate, not scripted).

A script item is a reply (``text``, ``tool_use``, ``message``, ``error``,
``delay``, ``disconnect``, ``stream_error``) or a callable that receives the
request JSON (with the thread history filled in) and returns a reply. An
empty script answers 500 "script exhausted" with ``x-should-retry: false``,
never hangs. A failure inside the fake (exhausted script, a callable that
raised, a request the real API would reject) is kept in ``failures`` and, by
default, raised as ``AssertionError`` when the context exits, so a test cannot
pass by accident.

Error replies carry ``retry-after-ms: 1`` by default, so the SDK's retries
(408/409/429/5xx, connection errors and timeouts) do not sleep.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from _local_server import LocalServer

__all__ = [
    "Delay",
    "Disconnect",
    "FakeAnthropic",
    "HTTPError",
    "Message",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptItem",
    "StreamError",
    "fake_anthropic",
]

JSONObject = dict[str, Any]

# Anthropic's `error.type` for each status the API documents.
_ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_ERROR_STATUSES: Mapping[str, int] = {
    "invalid_request_error": 400,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _new_id(prefix: str) -> str:
    return f"{prefix}_fake{uuid.uuid4().hex[:20]}"


# ----------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Message:
    """A successful model reply: content blocks (as the API returns them) and a stop reason."""

    content: tuple[JSONObject, ...]
    stop_reason: str = "end_turn"
    stop_sequence: str | None = None
    usage: JSONObject | None = None
    """Overrides of the computed `usage` fields."""
    event_delay: float = 0.0
    """Seconds to wait between SSE events when streamed (to test read timeouts mid-stream)."""


@dataclass(frozen=True)
class HTTPError:
    """An HTTP error status with a body in Anthropic's error format."""

    status: int
    body: JSONObject
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` before answering with `then`; with `then=None`, hang up without an answer."""

    seconds: float
    then: Reply | None = None


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without sending a response (the SDK raises `APIConnectionError`)."""


@dataclass(frozen=True)
class StreamError:
    """An error event in the middle of a stream (HTTP 200, then `event: error`).

    A non-streaming request gets the same error as an HTTP status instead.
    """

    error_type: str = "overloaded_error"
    message: str = "Overloaded"


Reply = Message | HTTPError | Delay | Disconnect | StreamError
Responder = Callable[[JSONObject], Reply]
"""A scripted callable: receives the request JSON (thread history filled in), returns a reply."""
ScriptItem = Reply | Responder


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received."""

    method: str
    path: str
    """The path without the query string, e.g. ``/v1/messages``."""
    query: dict[str, list[str]]
    headers: dict[str, str]
    """Header names in lower case."""
    body: JSONObject
    """The JSON body exactly as sent."""
    resolved: JSONObject
    """`body` with the server-held thread history (and its system/tools) filled in."""

    @property
    def betas(self) -> list[str]:
        """The names in the ``anthropic-beta`` header."""
        value = self.headers.get("anthropic-beta", "")
        return [name.strip() for name in value.split(",") if name.strip()]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[JSONObject]:
        """The whole conversation of this request (`resolved["messages"]`)."""
        messages: list[JSONObject] = self.resolved.get("messages", [])
        return messages


@dataclass
class _Thread:
    system: Any
    tools: Any
    messages: list[JSONObject]


@dataclass
class _Exchange:
    """What one request needs while its reply is produced."""

    body: JSONObject
    resolved: JSONObject
    thread: _Thread | None = None
    thread_messages: list[JSONObject] = field(default_factory=list)


# ----------------------------------------------------------------------------- server


class FakeAnthropic(LocalServer):
    """A scripted fake of the Anthropic Messages API on 127.0.0.1.

    Start it with ``with FakeAnthropic(...) as fake`` (or the `fake_anthropic`
    fixture); ``fake.url`` is the ``base_url`` for the SDK.
    """

    label = "FakeAnthropic"

    def __init__(
        self,
        *script: ScriptItem,
        threads: bool = True,
        validate: bool = True,
        strict: bool = True,
        stream_chunk_size: int = 8,
        lifetime: float = 300.0,
    ) -> None:
        """Args:
        script: replies (or callables returning one), served in order.
        threads: honour ``thread`` requests; when False, answer them with the
            400 ``thread_unsupported_request`` the SDK falls back from.
        validate: reject (400, without consuming the script) requests the real
            API would refuse: missing fields, unknown forced tool, orphan tool results.
        strict: raise `AssertionError` on exit if anything went wrong inside the fake.
        stream_chunk_size: characters per text / JSON / thinking delta when streaming.
        lifetime: seconds after start at which a forgotten server stops itself.
        """
        super().__init__(lifetime=lifetime, strict=strict)
        self._script: deque[ScriptItem] = deque(script)
        self._threads_enabled = threads
        self._validate = validate
        self._chunk_size = max(1, stream_chunk_size)
        self._requests: list[RecordedRequest] = []
        self._threads: dict[str, _Thread] = {}

    # --- reply builders ------------------------------------------------------

    @staticmethod
    def text_block(text: str) -> JSONObject:
        return {"type": "text", "text": text}

    @staticmethod
    def tool_use_block(name: str, input: Mapping[str, Any], id: str | None = None) -> JSONObject:
        return {
            "type": "tool_use",
            "id": id or _new_id("toolu"),
            "name": name,
            "input": dict(input),
        }

    @staticmethod
    def thinking_block(thinking: str, signature: str = "fake-signature") -> JSONObject:
        return {"type": "thinking", "thinking": thinking, "signature": signature}

    @staticmethod
    def message(
        *blocks: JSONObject,
        stop_reason: str | None = None,
        usage: JSONObject | None = None,
        event_delay: float = 0.0,
    ) -> Message:
        """A reply of several content blocks; the stop reason defaults to ``tool_use``
        when a block is a tool call, else ``end_turn``."""
        if stop_reason is None:
            has_tool = any(block.get("type") == "tool_use" for block in blocks)
            stop_reason = "tool_use" if has_tool else "end_turn"
        return Message(
            content=tuple(copy.deepcopy(block) for block in blocks),
            stop_reason=stop_reason,
            usage=usage,
            event_delay=event_delay,
        )

    @staticmethod
    def text(text: str, *, stop_reason: str = "end_turn") -> Message:
        """A plain text reply."""
        return FakeAnthropic.message(FakeAnthropic.text_block(text), stop_reason=stop_reason)

    @staticmethod
    def tool_use(
        name: str,
        input: Mapping[str, Any],
        id: str | None = None,
        *,
        text: str | None = None,
    ) -> Message:
        """A tool call (``stop_reason: tool_use``), optionally after a line of text."""
        blocks = [FakeAnthropic.text_block(text)] if text else []
        blocks.append(FakeAnthropic.tool_use_block(name, input, id))
        return FakeAnthropic.message(*blocks, stop_reason="tool_use")

    @staticmethod
    def error(
        status: int,
        message: str | None = None,
        *,
        error_type: str | None = None,
        details: JSONObject | None = None,
        retry_after_ms: float | None = 1,
        should_retry: bool | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HTTPError:
        """An HTTP error in Anthropic's format: ``{"type": "error", "error": {"type", "message"}}``.

        ``retry_after_ms`` (default 1 ms) is sent as ``retry-after-ms`` so the
        SDK's retry back-off does not sleep; None leaves the SDK's own back-off
        (0.5 s, doubling). ``should_retry`` sends ``x-should-retry``, which the
        SDK obeys over its status-code rules.
        """
        kind = error_type or _ERROR_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        error: JSONObject = {"type": kind, "message": message or f"fake {kind} ({status})"}
        if details is not None:
            error["details"] = details
        all_headers: dict[str, str] = {}
        if retry_after_ms is not None:
            all_headers["retry-after-ms"] = f"{retry_after_ms:g}"
        if should_retry is not None:
            all_headers["x-should-retry"] = "true" if should_retry else "false"
        all_headers.update(headers or {})
        body = {"type": "error", "error": error, "request_id": _new_id("req")}
        return HTTPError(status=status, body=body, headers=tuple(all_headers.items()))

    @staticmethod
    def delay(seconds: float, then: Reply | None = None) -> Delay:
        """Wait, then answer `then`; without `then`, hang up (the SDK times out or sees a drop)."""
        return Delay(seconds=seconds, then=then)

    @staticmethod
    def disconnect() -> Disconnect:
        """Drop the connection without a response."""
        return Disconnect()

    @staticmethod
    def stream_error(
        error_type: str = "overloaded_error", message: str = "Overloaded"
    ) -> StreamError:
        """An ``event: error`` after ``message_start`` of a stream."""
        return StreamError(error_type=error_type, message=message)

    # --- helpers for scripted callables -------------------------------------

    @staticmethod
    def tool_results(request: JSONObject) -> list[JSONObject]:
        """The ``tool_result`` blocks of the request's last user message."""
        messages = request.get("messages") or []
        if not messages or messages[-1].get("role") != "user":
            return []
        content = messages[-1].get("content")
        if not isinstance(content, list):
            return []
        return [
            block
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    @staticmethod
    def last_user_text(request: JSONObject) -> str:
        """The text of the request's last user message (its text blocks joined by newlines)."""
        for message in reversed(request.get("messages") or []):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            texts = [
                block.get("text", "")
                for block in content or []
                if isinstance(block, dict) and block.get("type") == "text"
            ]
            return "\n".join(texts)
        return ""

    # --- script and records ---------------------------------------------------

    def enqueue(self, *items: ScriptItem) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(items)

    @property
    def pending(self) -> int:
        """How many script items are not consumed yet."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self._requests:
                raise AssertionError("FakeAnthropic received no request")
            return self._requests[-1]

    @property
    def url(self) -> str:
        """The ``base_url`` to give the SDK."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point an SDK client (e.g. in a subprocess) at this fake."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": "test-key"}

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least `count` requests arrived; raises `TimeoutError` otherwise."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= count, timeout=timeout):
                raise TimeoutError(
                    f"FakeAnthropic got {len(self._requests)} of {count} requests in {timeout}s"
                )
            return list(self._requests)

    # --- lifecycle ------------------------------------------------------------

    def _new_server(self) -> _Server:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        return server

    # --- request handling (called on handler threads) -------------------------

    def _record(self, handler: _Handler, body: JSONObject, resolved: JSONObject) -> RecordedRequest:
        parts = urlsplit(handler.path)
        record = RecordedRequest(
            method=handler.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={name.lower(): value for name, value in handler.headers.items()},
            body=body,
            resolved=resolved,
        )
        with self._lock:
            self._requests.append(record)
            self._lock.notify_all()
        return record

    def _handle_post(self, handler: _Handler) -> None:
        path = urlsplit(handler.path).path.rstrip("/")
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._record(handler, {}, {})
            self._fail(f"POST {path}: body is not a JSON object")
            handler.send_reply(
                FakeAnthropic.error(400, "request body is not a JSON object", should_retry=False)
            )
            return

        if path == "/v1/messages/count_tokens":
            self._record(handler, body, body)
            tokens = _estimate_tokens([body.get("system"), body.get("tools"), body.get("messages")])
            handler.send_json(200, {"input_tokens": tokens})
            return
        if path != "/v1/messages":
            self._record(handler, body, body)
            self._fail(f"POST {path}: not emulated")
            handler.send_reply(
                FakeAnthropic.error(404, f"FakeAnthropic does not emulate POST {path}")
            )
            return

        exchange, refusal = self._resolve_thread(body)
        self._record(handler, body, exchange.resolved)
        if refusal is not None:
            handler.send_reply(refusal)
            return
        if self._validate:
            problem = _validate_request(exchange.resolved)
            if problem is not None:
                self._fail(f"invalid request: {problem}")
                handler.send_reply(FakeAnthropic.error(400, problem, should_retry=False))
                return

        with self._lock:
            item = self._script.popleft() if self._script else None
            number = len(self._requests)
        if item is None:
            reason = f"script exhausted: no reply left for request #{number} (POST {path})"
            self._fail(reason)
            handler.send_reply(
                FakeAnthropic.error(500, f"FakeAnthropic {reason}", should_retry=False)
            )
            return
        if callable(item):
            try:
                item = item(copy.deepcopy(exchange.resolved))
            except Exception as err:
                reason = f"scripted callable raised {err!r} on request #{number}"
                self._fail(reason)
                handler.send_reply(
                    FakeAnthropic.error(500, f"FakeAnthropic {reason}", should_retry=False)
                )
                return
        self._serve(handler, exchange, item)

    def _resolve_thread(self, body: JSONObject) -> tuple[_Exchange, HTTPError | None]:
        thread = body.get("thread")
        if thread is None or thread is False:
            return _Exchange(body=body, resolved=body), None
        if not self._threads_enabled:
            error = FakeAnthropic.error(
                400,
                "Threads are not supported by this server.",
                details={"error_code": "thread_unsupported_request", "unsupported": ["thread"]},
                should_retry=False,
            )
            return _Exchange(body=body, resolved=body), error
        new_messages = list(body.get("messages") or [])
        if isinstance(thread, dict) and thread.get("type") == "continue":
            previous = str(thread.get("previous_message_id"))
            with self._lock:
                held = self._threads.get(previous)
            if held is None:
                error = FakeAnthropic.error(
                    404,
                    f"No thread state for previous_message_id {previous}.",
                    details={"error_code": "thread_not_found"},
                    should_retry=False,
                )
                return _Exchange(body=body, resolved=body), error
            resolved = {k: v for k, v in body.items() if k != "thread"}
            if held.system is not None:
                resolved["system"] = held.system
            if held.tools is not None:
                resolved["tools"] = held.tools
            resolved["messages"] = [*held.messages, *new_messages]
            state = _Thread(system=held.system, tools=held.tools, messages=[])
        else:
            resolved = {k: v for k, v in body.items() if k != "thread"}
            state = _Thread(system=body.get("system"), tools=body.get("tools"), messages=[])
        return _Exchange(
            body=body, resolved=resolved, thread=state, thread_messages=resolved["messages"]
        ), None

    def _serve(self, handler: _Handler, exchange: _Exchange, reply: Reply) -> None:
        if isinstance(reply, Delay):
            if self._stopping.wait(reply.seconds) or reply.then is None:
                handler.hang_up()
                return
            self._serve(handler, exchange, reply.then)
        elif isinstance(reply, Disconnect):
            handler.hang_up()
        elif isinstance(reply, HTTPError):
            handler.send_reply(reply)
        elif isinstance(reply, StreamError):
            if exchange.body.get("stream"):
                message = self._message_json(exchange, FakeAnthropic.message())
                handler.send_stream_error(message, reply)
            else:
                status = _ERROR_STATUSES.get(reply.error_type, 500)
                handler.send_reply(
                    FakeAnthropic.error(status, reply.message, error_type=reply.error_type)
                )
        elif isinstance(reply, Message):
            message = self._message_json(exchange, reply)
            if exchange.thread is not None:
                assistant = {"role": "assistant", "content": copy.deepcopy(message["content"])}
                exchange.thread.messages = [*exchange.thread_messages, assistant]
                with self._lock:
                    self._threads[message["id"]] = exchange.thread
            if exchange.body.get("stream"):
                handler.send_stream(message, reply.event_delay, self._chunk_size, self._stopping)
            else:
                handler.send_json(200, message)
        else:
            self._fail(f"unknown script item {reply!r}")
            handler.send_reply(
                FakeAnthropic.error(500, f"FakeAnthropic: unknown script item {reply!r}")
            )

    def _message_json(self, exchange: _Exchange, reply: Message) -> JSONObject:
        request = exchange.resolved
        usage: JSONObject = {
            "input_tokens": _estimate_tokens(
                [request.get("system"), request.get("tools"), request.get("messages")]
            ),
            "output_tokens": _estimate_tokens(list(reply.content)),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        }
        usage.update(reply.usage or {})
        content = [copy.deepcopy(block) for block in reply.content]
        if thinks(request) and not any(b.get("type") == "thinking" for b in content):
            # A thinking model's reply opens with a thinking block, its text omitted by
            # default: a client must pick blocks by type, not by position.
            content.insert(0, FakeAnthropic.thinking_block("", signature="fake-signature"))
        return {
            "id": _new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": str(request.get("model") or "claude-fake"),
            "content": content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": reply.stop_sequence,
            "usage": usage,
        }


def _estimate_tokens(parts: Sequence[object]) -> int:
    return max(1, len(json.dumps([part for part in parts if part is not None], default=str)) // 4)


@dataclass(frozen=True)
class ModelRules:
    """What the real API refuses for one model family, as Anthropic's pages state it.

    Written here from the documentation, not from mdmem's own table, so a test
    through this fake checks mdmem against the docs: "Claude Sonnet 5.5
    migration guide" (thinking on by default; thinking budgets, sampling
    parameters, assistant prefill, forced tool choice and ``thinking:
    {"type": "disabled"}`` return a 400), "What's new in Claude Opus 5.5"
    (thinking can't be disabled; forced tool use returns an error), "What's new
    in Claude Haiku 5.5" (manual thinking budgets, non-default sampling
    parameters and prefill return errors; adaptive thinking is optional), and
    the general rule that thinking may not be on when tool_choice forces a tool.
    """

    thinks_by_default: bool = False
    refuses_forced_tool: bool = False
    refuses_disabled_thinking: bool = False
    refuses_budget: bool = False
    refuses_sampling: bool = False
    refuses_prefill: bool = False


_ALWAYS_THINKS = ModelRules(True, True, True, True, True, True)
MODEL_RULES: tuple[tuple[str, ModelRules], ...] = (
    # Longest prefixes first: "claude-sonnet-5-5" before "claude-sonnet-5".
    ("claude-opus-5-5", _ALWAYS_THINKS),
    ("claude-sonnet-5-5", _ALWAYS_THINKS),
    ("claude-fable-5", _ALWAYS_THINKS),
    ("claude-mythos-5", _ALWAYS_THINKS),
    ("claude-opus-5", ModelRules(True, False, False, True, True, True)),
    ("claude-sonnet-5", ModelRules(True, False, False, True, True, True)),
    ("claude-haiku-5-5", ModelRules(False, False, False, True, True, True)),
    ("claude-opus-4-8", ModelRules(refuses_budget=True, refuses_sampling=True)),
    ("claude-opus-4-7", ModelRules(refuses_budget=True, refuses_sampling=True)),
)


def model_rules(model: str) -> ModelRules:
    """The refusal rules of ``model`` (no rule: an older model that accepts everything)."""
    name = model.lower().removeprefix("anthropic.")
    for prefix, rules in MODEL_RULES:
        if name.startswith(prefix):
            return rules
    return ModelRules()


def _model_problem(request: JSONObject) -> str | None:
    """Why the real API would refuse ``request`` for its model, or None."""
    model = str(request.get("model"))
    rules = model_rules(model)
    thinking = request.get("thinking") or {}
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    forced = (request.get("tool_choice") or {}).get("type") in ("any", "tool")
    sampling = [key for key in ("temperature", "top_p", "top_k") if key in request]
    if sampling and rules.refuses_sampling:
        return f"{', '.join(sampling)}: not supported for {model}; remove sampling parameters"
    if kind == "enabled" and rules.refuses_budget:
        return f'thinking.type.enabled is not supported for this model ({model}); use "adaptive"'
    if kind == "disabled" and rules.refuses_disabled_thinking:
        return f"thinking cannot be disabled for {model}"
    if forced and rules.refuses_forced_tool:
        return f"tool_choice: forced tool use is not supported for {model}; use auto"
    thinks = kind in ("enabled", "adaptive", "between_tools") or (
        rules.thinks_by_default and kind != "disabled"
    )
    if forced and thinks:
        return "Thinking may not be enabled when tool_choice forces tool use."
    messages = request.get("messages") or []
    if rules.refuses_prefill and messages and messages[-1].get("role") == "assistant":
        return "Prefilling assistant messages is not supported for this model."
    return None


def thinks(request: JSONObject) -> bool:
    """Whether the model of ``request`` thinks first (its reply opens with thinking)."""
    thinking = request.get("thinking") or {}
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind in ("enabled", "adaptive"):
        return True
    return model_rules(str(request.get("model"))).thinks_by_default and kind not in (
        "disabled",
        "between_tools",
    )


def _validate_request(request: JSONObject) -> str | None:
    """Why the real API would reject `request` with a 400, or None.

    Only the checks that catch client bugs, and each model's documented refusals
    (:data:`MODEL_RULES`).
    """
    for key, kind in (("model", str), ("max_tokens", int), ("messages", list)):
        if not isinstance(request.get(key), kind):
            return f"{key}: required field missing or of the wrong type"
    problem = _model_problem(request)
    if problem is not None:
        return problem
    messages: list[Any] = request["messages"]
    if not messages:
        return "messages: at least one message is required"
    tool_names = {tool.get("name") for tool in request.get("tools") or [] if isinstance(tool, dict)}
    tool_choice = request.get("tool_choice") or {}
    if tool_choice.get("type") == "tool" and tool_choice.get("name") not in tool_names:
        return f"tool_choice: tool {tool_choice.get('name')!r} is not in tools"
    previous_tool_ids: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "user",
            "assistant",
            "system",
        ):
            return f"messages.{index}: role must be 'user', 'assistant' or 'system'"
        content = message.get("content")
        if not isinstance(content, (str, list)):
            return f"messages.{index}.content: must be a string or a list of blocks"
        blocks = (
            [block for block in content if isinstance(block, dict)]
            if isinstance(content, list)
            else []
        )
        for block in blocks:
            if (
                block.get("type") == "tool_result"
                and block.get("tool_use_id") not in previous_tool_ids
            ):
                unknown = block.get("tool_use_id")
                return f"messages.{index}: tool_result for unknown tool_use_id {unknown!r}"
        previous_tool_ids = {
            str(block.get("id")) for block in blocks if block.get("type") == "tool_use"
        }
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # FakeAnthropic.stop() ends the handler threads: joining here would wait for idle keep-alives.
    block_on_close = False
    fake: FakeAnthropic


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeAnthropic/1"
    # A safety net: an idle keep-alive connection is dropped after this many seconds.
    timeout = 30.0
    server: _Server

    SSE_HEADERS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("Content-Type", "text/event-stream; charset=utf-8"),
        ("Cache-Control", "no-cache"),
        ("Transfer-Encoding", "chunked"),
    )

    def setup(self) -> None:
        super().setup()
        self.server.fake.opened(self.connection)

    def finish(self) -> None:
        self.server.fake.closed(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: failures are reported through `FakeAnthropic.failures`."""

    def do_POST(self) -> None:
        try:
            self.server.fake._handle_post(self)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            # The client gave up (e.g. its timeout fired during a delay): nothing to answer.
            self.close_connection = True
        except Exception as err:  # a bug in the fake: report it, never a traceback on stderr
            self.server.fake._fail(f"FakeAnthropic crashed on POST {self.path}: {err!r}")
            self.close_connection = True

    def do_GET(self) -> None:
        self.server.fake._record(self, {}, {})
        self.send_reply(FakeAnthropic.error(404, f"FakeAnthropic does not emulate GET {self.path}"))

    # --- writing ---

    def _start(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        self.send_response(status)
        self.send_header("request-id", _new_id("req"))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def send_json(
        self, status: int, payload: JSONObject, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        data = json.dumps(payload).encode()
        self._start(
            status,
            [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers],
        )
        self.wfile.write(data)

    def send_reply(self, error: HTTPError) -> None:
        self.send_json(error.status, error.body, error.headers)

    def hang_up(self) -> None:
        self.close_connection = True

    def _event(self, payload: JSONObject) -> None:
        data = f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def send_stream_error(self, message: JSONObject, error: StreamError) -> None:
        self._start(200, self.SSE_HEADERS)
        self._event(
            {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}
        )
        self._event({"type": "ping"})
        self._event(
            {"type": "error", "error": {"type": error.error_type, "message": error.message}}
        )
        self._end_stream()

    def send_stream(
        self, message: JSONObject, event_delay: float, chunk: int, stopping: threading.Event
    ) -> None:
        self._start(200, self.SSE_HEADERS)
        usage = message["usage"]
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events: list[JSONObject] = [{"type": "message_start", "message": start}, {"type": "ping"}]
        for index, block in enumerate(message["content"]):
            events.extend(_block_events(index, block, chunk))
        events.append(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": message["stop_reason"],
                    "stop_sequence": message["stop_sequence"],
                },
                "usage": {"output_tokens": usage["output_tokens"]},
            }
        )
        events.append({"type": "message_stop"})
        for number, event in enumerate(events):
            if number and event_delay and stopping.wait(event_delay):
                self.hang_up()
                return
            self._event(event)
        self._end_stream()


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: JSONObject, chunk: int) -> list[JSONObject]:
    """The start / delta / stop events that stream one content block."""
    kind = block.get("type")
    deltas: list[JSONObject]
    if kind == "text":
        start: JSONObject = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in _chunks(block["text"], chunk)]
    elif kind in ("tool_use", "server_tool_use"):
        start = {**block, "input": {}}
        # The real API opens a tool call with an empty partial_json.
        partial = ["", *_chunks(json.dumps(block.get("input", {})), chunk)]
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in partial]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": part}
            for part in _chunks(block["thinking"], chunk)
        ]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    else:
        start, deltas = block, []
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _no_proxy_with_loopback(value: str | None) -> str:
    hosts = [host.strip() for host in (value or "").split(",") if host.strip()]
    for host in ("127.0.0.1", "localhost"):
        if host not in hosts:
            hosts.append(host)
    return ",".join(hosts)


@pytest.fixture
def fake_anthropic(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """A started `FakeAnthropic` with an empty script (``fake_anthropic.enqueue(...)``).

    Loopback is added to ``NO_PROXY`` so a proxy configured in the environment
    never sees the test traffic. The server stops when the test ends; failures
    inside it fail the test.
    """
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, _no_proxy_with_loopback(os.environ.get(name)))
    with FakeAnthropic() as fake:
        yield fake
