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

What it leaves alone: a ``stream=True`` call gets the memory in ``system`` but
its exchange is not handed over (the wrapper does not consume the stream for
you); ``messages.stream(...)`` and the beta API pass through untouched. A
memory problem never breaks the call: it is logged and the call goes ahead.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

from mdmem.store import ledger

if TYPE_CHECKING:
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

    def _hand_over(self, kwargs: dict[str, Any], messages: list[object], reply: object) -> None:
        if kwargs.get("stream"):
            return
        try:
            exchange = _exchange(messages, reply)
            if exchange is not None:
                self._manager.update_async(exchange)
        except Exception as exc:
            log.warning("mdmem wrap: exchange not handed over: %s", exc)

    def create(self, **kwargs: Any) -> Any:
        """``messages.create`` with memory in ``system``; the finished exchange is remembered."""
        messages = self._prepare(kwargs)
        reply = self._messages.create(**kwargs)
        self._hand_over(kwargs, messages, reply)
        return reply


class _AsyncMessages(_Messages):
    async def create(self, **kwargs: Any) -> Any:
        """``messages.create`` with memory in ``system``; the finished exchange is remembered."""
        messages = self._prepare(kwargs)
        reply = await self._messages.create(**kwargs)
        self._hand_over(kwargs, messages, reply)
        return reply
