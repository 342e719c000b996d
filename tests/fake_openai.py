"""A local fake of the OpenAI Chat Completions API, for tests that drive the real `openai` SDK.

A real HTTP server on 127.0.0.1 (an OS-chosen port). A test scripts what the
"model" answers, in order; every request is recorded::

    with FakeOpenAI(FakeOpenAI.tool_call("record", {"operations": []})) as fake:
        client = openai.OpenAI(api_key="k", base_url=fake.url, max_retries=0)
        ...
        assert fake.requests[0].body["tool_choice"]["function"]["name"] == "record"

It serves ``POST /v1/chat/completions`` as JSON or, with ``"stream": true``,
as server-sent ``chat.completion.chunk`` events ending in ``data: [DONE]``
(a last chunk with ``usage`` when ``stream_options.include_usage`` is set).
A script item is a reply (``text``, ``tool_call``, ``error``, ``garbage``,
``Delay``, ``Disconnect``) or a callable that takes the request JSON and
returns one. An empty script answers 500 with ``x-should-retry: false``; a
failure inside the fake is raised as ``AssertionError`` when the context exits.
Error replies carry ``retry-after-ms: 1``, so the SDK's retries do not sleep.
The server stops itself after ``lifetime`` seconds, whatever the test does.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from _local_server import LocalServer

__all__ = ["Completion", "Delay", "Disconnect", "FakeOpenAI", "Garbage", "HTTPError", "fake_openai"]

JSONObject = dict[str, Any]


@dataclass(frozen=True)
class Completion:
    """A successful answer: text content and/or tool calls, a finish reason, usage overrides."""

    content: str | None = None
    tool_calls: tuple[JSONObject, ...] = ()
    finish_reason: str = "stop"
    usage: JSONObject | None = None


@dataclass(frozen=True)
class HTTPError:
    status: int
    body: JSONObject
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Garbage:
    """HTTP 200 with a body that is not a chat completion (or not JSON at all)."""

    body: bytes = b"<html>Bad gateway</html>"
    content_type: str = "text/html"


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds``, then answer ``then``; with None, hang up without answering."""

    seconds: float
    then: Reply | None = None


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without a response."""


Reply = Completion | HTTPError | Garbage | Delay | Disconnect
ScriptItem = Reply | Callable[[JSONObject], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: JSONObject


def _tokens(value: object) -> int:
    return max(1, len(json.dumps(value, default=str, ensure_ascii=False)) // 4)


class FakeOpenAI(LocalServer):
    """The fake server; a context manager that starts and stops it."""

    label = "FakeOpenAI"

    def __init__(self, *script: ScriptItem, lifetime: float = 60.0, strict: bool = True) -> None:
        super().__init__(lifetime=lifetime, strict=strict)
        self._script: deque[ScriptItem] = deque(script)
        self._requests: list[RecordedRequest] = []

    # -- scripting -------------------------------------------------------------------

    @staticmethod
    def text(content: str, *, usage: JSONObject | None = None, finish: str = "stop") -> Completion:
        return Completion(content=content, finish_reason=finish, usage=usage)

    @staticmethod
    def tool_call(
        name: str, arguments: object, *, usage: JSONObject | None = None, raw: str | None = None
    ) -> Completion:
        call = {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": raw if raw is not None else json.dumps(arguments),
            },
        }
        return Completion(tool_calls=(call,), finish_reason="tool_calls", usage=usage)

    @staticmethod
    def error(
        status: int, message: str = "error", *, should_retry: bool | None = None
    ) -> HTTPError:
        headers = [("retry-after-ms", "1")]
        if should_retry is not None:
            headers.append(("x-should-retry", "true" if should_retry else "false"))
        body = {"error": {"message": message, "type": "server_error", "code": None}}
        return HTTPError(status, body, tuple(headers))

    def enqueue(self, *items: ScriptItem) -> None:
        with self._lock:
            self._script.extend(items)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def url(self) -> str:
        """The ``base_url`` to give the SDK (with ``/v1``, as OpenAI's own)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _new_server(self) -> _Server:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        return server

    # -- serving ------------------------------------------------------------------------

    def _handle(self, handler: _Handler) -> None:
        path = handler.path.split("?", 1)[0].rstrip("/")
        length = int(handler.headers.get("content-length") or 0)
        try:
            body = json.loads(handler.rfile.read(length) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._fail(f"POST {path}: body is not a JSON object")
            handler.send_json(400, FakeOpenAI.error(400, "not JSON").body)
            return
        with self._lock:
            self._requests.append(
                RecordedRequest(path, {k.lower(): v for k, v in handler.headers.items()}, body)
            )
            item = self._script.popleft() if self._script else None
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._fail(f"POST {path}: not emulated")
            handler.send_json(404, FakeOpenAI.error(404, "not found").body)
            return
        problem = _invalid(body)
        if problem:
            self._fail(f"invalid request: {problem}")
            handler.send_reply(FakeOpenAI.error(400, problem, should_retry=False))
            return
        if item is None:
            self._fail("script exhausted")
            handler.send_reply(FakeOpenAI.error(500, "script exhausted", should_retry=False))
            return
        if callable(item):
            try:
                item = item(copy.deepcopy(body))
            except Exception as err:
                self._fail(f"scripted callable raised {err!r}")
                handler.send_reply(FakeOpenAI.error(500, "callable raised", should_retry=False))
                return
        self._serve(handler, body, item)

    def _serve(self, handler: _Handler, body: JSONObject, reply: Reply) -> None:
        if isinstance(reply, Delay):
            if self._stopping.wait(reply.seconds) or reply.then is None:
                handler.close_connection = True
                return
            self._serve(handler, body, reply.then)
        elif isinstance(reply, Disconnect):
            handler.close_connection = True
        elif isinstance(reply, HTTPError):
            handler.send_reply(reply)
        elif isinstance(reply, Garbage):
            handler.send_raw(200, reply.body, reply.content_type)
        elif body.get("stream"):
            handler.send_stream(self._chunks(body, reply))
        else:
            handler.send_json(200, self._completion(body, reply))

    def _usage(self, body: JSONObject, reply: Completion) -> JSONObject:
        prompt = _tokens(body.get("messages")) + _tokens(body.get("tools") or "")
        completion = _tokens([reply.content, list(reply.tool_calls)])
        usage: JSONObject = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        usage.update(reply.usage or {})
        return usage

    def _completion(self, body: JSONObject, reply: Completion) -> JSONObject:
        message: JSONObject = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [copy.deepcopy(c) for c in reply.tool_calls]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model")),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": self._usage(body, reply),
        }

    def _chunks(self, body: JSONObject, reply: Completion) -> list[JSONObject]:
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": str(body.get("model")),
        }

        def chunk(delta: JSONObject, finish: str | None = None) -> JSONObject:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        out = [chunk({"role": "assistant", "content": ""})]
        text = reply.content or ""
        out.extend(chunk({"content": text[i : i + 7]}) for i in range(0, len(text), 7))
        for index, call in enumerate(reply.tool_calls):
            arguments = call["function"]["arguments"]
            head = {"index": index, "id": call["id"], "type": "function"}
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                **head,
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            out.extend(
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "function": {"arguments": arguments[i : i + 9]}}
                        ]
                    }
                )
                for i in range(0, len(arguments), 9)
            )
        out.append(chunk({}, reply.finish_reason))
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append({**base, "choices": [], "usage": self._usage(body, reply)})
        return out


def _invalid(body: JSONObject) -> str | None:
    """Why the real API would answer 400, for the client bugs worth catching."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: required"
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "user",
            "assistant",
            "tool",
            "developer",
        ):
            return "messages: bad role"
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        names = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        if choice.get("function", {}).get("name") not in names:
            return "tool_choice names a function not in tools"
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAI


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30.0
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.fake.opened(self.connection)

    def finish(self) -> None:
        self.server.fake.closed(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent."""

    def do_POST(self) -> None:
        try:
            self.server.fake._handle(self)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True
        except Exception as err:
            self.server.fake._fail(f"FakeOpenAI crashed: {err!r}")
            self.close_connection = True

    def send_raw(
        self, status: int, data: bytes, content_type: str, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_json(
        self, status: int, payload: JSONObject, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def send_reply(self, error: HTTPError) -> None:
        self.send_json(error.status, error.body, error.headers)

    def send_stream(self, chunks: list[JSONObject]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for payload in [*(json.dumps(c) for c in chunks), "[DONE]"]:
            data = f"data: {payload}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A started `FakeOpenAI` with an empty script; loopback added to ``NO_PROXY``."""
    for name in ("NO_PROXY", "no_proxy"):
        hosts = [h for h in (os.environ.get(name) or "").split(",") if h]
        monkeypatch.setenv(name, ",".join([*hosts, "127.0.0.1", "localhost"]))
    with FakeOpenAI() as fake:
        yield fake
