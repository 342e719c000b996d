"""Memory for people who call the Anthropic SDK themselves: ``wrap(client)``.

::

    from anthropic import Anthropic
    from mdmem.integrations.wrap import wrap

    client = wrap(Anthropic())            # or wrap(AsyncAnthropic())
    reply = client.messages.create(model=..., max_tokens=..., messages=[...])

``client.messages.create`` then adds to ``system`` the prompt block (the index
of both stores) and, when the Manager can recall (``Manager.recall_block``),
the notes that answer the latest user message within ``budget_tokens``; and it
hands each completed exchange (the messages since the last user text, plus the
reply, when the reply ended its turn) to ``Manager.update_async``, which
returns at once. Everything else on the client is the client's own.

Streams too: ``create(stream=True)`` returns the SDK's stream, watched as you
read it, and ``messages.stream(...)`` the SDK's stream manager; either way the
exchange is handed over when the stream has been read to its ``message_stop``
(a stream closed early was not a finished turn, and is not). The beta API
passes through untouched. A memory problem never breaks the call: it is logged
and the call goes ahead.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from typing import TYPE_CHECKING, Any

from mdmem.store import ledger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from mdmem.manager.manager import Manager

__all__ = ["memory_system", "wrap"]

log = logging.getLogger("mdmem")
_DONE = ("end_turn", "stop_sequence")


def wrap(client: Any, manager: Manager | None = None, budget_tokens: int = 1200) -> Any:
    """A client-like object whose ``messages.create`` reads and feeds mdmem's memory.

    ``manager`` defaults to a :class:`~mdmem.Manager` for the current directory.
    Works for ``anthropic.Anthropic`` and ``anthropic.AsyncAnthropic``.
    """
    if manager is None:
        from mdmem.manager.manager import Manager

        manager = Manager()
    return _Client(client, manager, budget_tokens)


class _Client:
    def __init__(self, client: Any, manager: Manager, budget_tokens: int) -> None:
        self._client = client
        self.manager = manager
        create = client.messages.create
        # The SDK's async create is wrapped by a decorator that hides that it is a coroutine.
        is_async = inspect.iscoroutinefunction(inspect.unwrap(create)) or type(
            client
        ).__name__.startswith("Async")
        self.messages = (_AsyncMessages if is_async else _Messages)(
            client.messages, manager, budget_tokens
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _get(obj: object, key: str) -> object:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _has_text(message: object) -> bool:
    content = _get(message, "content")
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        return any(
            _get(b, "type") == "text" and str(_get(b, "text") or "").strip() for b in content
        )
    return False


def _text_of(message: object) -> str:
    content = _get(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(_get(b, "text") or "") for b in content if _get(b, "type") == "text")
    return ""


def _latest_user_text(messages: list[object]) -> str:
    for message in reversed(messages):
        if _get(message, "role") == "user" and _has_text(message):
            return _text_of(message)
    return ""


def memory_system(system: object, manager: Manager, query: str, budget_tokens: int) -> object:
    """``system`` with the prompt block and the recalled notes added (as text or a block)."""
    parts = []
    block = manager.index
    if block:
        parts.append(f"# Long-term memory (mdmem)\n{block}")
        ledger.record_block(manager.project.path, manager.user.path, block, "wrap")
    recall = getattr(manager, "recall_block", None)
    if callable(recall) and query.strip():
        recalled = str(recall(query, budget_tokens=budget_tokens) or "")
        if recalled.strip():
            parts.append(f"# Notes recalled for this message\n{recalled}")
            ledger.record_block(manager.project.path, manager.user.path, recalled, "recall")
    if not parts:
        return system
    memory = "\n\n".join(parts)
    if system is None or system == "" or type(system).__name__ in ("NotGiven", "Omit"):
        return memory
    if isinstance(system, str):
        return f"{system}\n\n{memory}"
    if isinstance(system, list):
        return [*system, {"type": "text", "text": memory}]
    return system  # something we do not understand: leave it as the caller gave it


def _block_dict(block: object) -> object:
    dump = getattr(block, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else block


def _exchange(messages: list[object], reply: object) -> list[object] | None:
    """The messages since the last user text, plus the reply; None while the turn goes on."""
    if _get(reply, "stop_reason") not in _DONE:
        return None
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        if _get(messages[index], "role") == "user" and _has_text(messages[index]):
            start = index
            break
    content = [_block_dict(b) for b in (_get(reply, "content") or [])]  # type: ignore[attr-defined]
    return [*messages[start:], {"role": "assistant", "content": content}]


class _Reply:
    """The reply a stream spells out event by event: its content blocks and stop reason."""

    def __init__(self) -> None:
        self.content: list[dict[str, Any]] = []
        self.stop_reason: object = None
        self.done = False
        self._json: dict[int, str] = {}

    def feed(self, event: object) -> bool:
        """Take one event; True when it ended the message."""
        kind = _get(event, "type")
        index = _get(event, "index")
        if kind == "content_block_start" and isinstance(index, int):
            block = _block_dict(_get(event, "content_block"))
            self.content.append(dict(block) if isinstance(block, dict) else {})
        elif kind == "content_block_delta" and isinstance(index, int) and index < len(self.content):
            delta = _get(event, "delta")
            if _get(delta, "type") == "text_delta":
                block = self.content[index]
                block["text"] = str(block.get("text") or "") + str(_get(delta, "text") or "")
            elif _get(delta, "type") == "input_json_delta":
                self._json[index] = self._json.get(index, "") + str(
                    _get(delta, "partial_json") or ""
                )
        elif kind == "content_block_stop" and index in self._json:
            with contextlib.suppress(ValueError):  # a cut-off input: the block keeps {}
                self.content[index]["input"] = json.loads(self._json.pop(index) or "{}")
        elif kind == "message_delta":
            self.stop_reason = _get(_get(event, "delta"), "stop_reason")
        elif kind == "message_stop":
            self.done = True
        return self.done


class _Watched:
    """The SDK's stream, unchanged to its reader, handing the exchange over at its end."""

    def __init__(self, stream: Any, finish: Callable[[object], None]) -> None:
        self._stream = stream
        self._finish = finish
        self._reply = _Reply()
        self._handed = False

    def _see(self, event: object) -> object:
        try:
            if self._reply.feed(event) and not self._handed:
                self._handed = True
                self._finish(self._reply)
        except Exception as exc:  # memory must never break the stream
            log.warning("mdmem wrap: exchange not handed over: %s", exc)
        return event

    def __iter__(self) -> Iterator[object]:
        for event in self._stream:
            yield self._see(event)

    def __next__(self) -> object:
        return self._see(next(self._stream))

    def __aiter__(self) -> AsyncIterator[object]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[object]:
        async for event in self._stream:
            yield self._see(event)

    async def __anext__(self) -> object:
        return self._see(await self._stream.__anext__())

    def __enter__(self) -> _Watched:
        self._stream.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.__exit__(*exc)

    async def __aenter__(self) -> _Watched:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _WatchedManager:
    """``messages.stream(...)``'s manager; what it opens is watched (see :class:`_Watched`)."""

    def __init__(self, manager: Any, finish: Callable[[object], None]) -> None:
        self._manager = manager
        self._finish = finish
        self._final: Any = None

    def _snapshot(self) -> None:
        """Hand over the message the stream accumulated, if it was read to the end."""
        try:
            message = self._final.current_message_snapshot if self._final is not None else None
            if message is not None and _get(message, "stop_reason") is not None:
                self._finish(message)
        except Exception as exc:
            log.warning("mdmem wrap: exchange not handed over: %s", exc)

    def __enter__(self) -> Any:
        self._final = self._manager.__enter__()
        return self._final

    def __exit__(self, *exc: object) -> None:
        try:
            self._manager.__exit__(*exc)
        finally:
            if exc[0] is None:
                self._snapshot()

    async def __aenter__(self) -> Any:
        self._final = await self._manager.__aenter__()
        return self._final

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._manager.__aexit__(*exc)
        finally:
            if exc[0] is None:
                self._snapshot()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)


class _Messages:
    def __init__(self, messages: Any, manager: Manager, budget_tokens: int) -> None:
        self._messages = messages
        self._manager = manager
        self._budget = budget_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._messages, name)

    def _prepare(self, kwargs: dict[str, Any]) -> list[object]:
        messages = list(kwargs.get("messages") or [])
        try:
            kwargs["system"] = memory_system(
                kwargs.get("system"), self._manager, _latest_user_text(messages), self._budget
            )
            if kwargs["system"] is None:
                del kwargs["system"]
        except Exception as exc:  # memory must never break the call
            log.warning("mdmem wrap: no memory for this call: %s", exc)
        return messages

    def _hand_over(self, messages: list[object], reply: object) -> None:
        try:
            exchange = _exchange(messages, reply)
            if exchange is not None:
                self._manager.update_async(exchange)
        except Exception as exc:
            log.warning("mdmem wrap: exchange not handed over: %s", exc)

    def _returned(self, kwargs: dict[str, Any], messages: list[object], reply: Any) -> Any:
        if kwargs.get("stream"):
            return _Watched(reply, lambda done: self._hand_over(messages, done))
        self._hand_over(messages, reply)
        return reply

    def create(self, **kwargs: Any) -> Any:
        """``messages.create`` with memory in ``system``; the finished exchange is remembered."""
        messages = self._prepare(kwargs)
        return self._returned(kwargs, messages, self._messages.create(**kwargs))

    def stream(self, **kwargs: Any) -> Any:
        """``messages.stream`` with memory in ``system``; a stream read to its end is remembered."""
        messages = self._prepare(kwargs)
        manager = self._messages.stream(**kwargs)
        return _WatchedManager(manager, lambda done: self._hand_over(messages, done))


class _AsyncMessages(_Messages):
    async def create(self, **kwargs: Any) -> Any:
        """``messages.create`` with memory in ``system``; the finished exchange is remembered."""
        messages = self._prepare(kwargs)
        return self._returned(kwargs, messages, await self._messages.create(**kwargs))
