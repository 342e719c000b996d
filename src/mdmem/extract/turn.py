"""One agent turn, reduced to what the extraction model may see: roles and text.

Messages arrive as dicts or objects with ``role`` and ``content``, where content
is a string or a list of Anthropic-style content blocks. Only text blocks are
kept by default, as in the original design: tool calls and tool results are
large, and a fact worth keeping should be in what the assistant said. When
asked, tool calls and results are kept as short, truncated excerpts.

Redaction comes first (``from_messages(..., redactor=...)``): a message is
redacted whole, and only then cut, so a secret straddling a cut cannot
survive as two harmless-looking halves.

The turn is bounded: each message and the whole turn are cut to fixed sizes
in UTF-8 bytes, keeping the start and the end of what is cut, so a turn
carrying megabytes of tool output still makes a small extraction prompt.
Bytes, not characters, because a byte budget is also a token budget in every
script: a CJK character is three bytes and about one token, English text about
four bytes a token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mdmem.extract.providers.base import Message

if TYPE_CHECKING:
    from mdmem.privacy import Redactor

__all__ = [
    "TurnLimits",
    "estimate_tokens",
    "from_messages",
    "render",
    "scrub",
    "worth_a_call",
]


@dataclass(frozen=True)
class TurnLimits:
    """How much of a turn reaches the model."""

    include_tools: bool = False
    """Keep tool calls and tool results, as excerpts."""
    tool_excerpt_bytes: int = 400
    message_bytes: int = 4_000
    turn_bytes: int = 12_000
    """At most ~4,000 tokens of CJK text, ~3,000 of English."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """``text`` with every lone surrogate (``\\ud800`` in a transcript's JSON) made U+FFFD.

    A lone surrogate cannot be written as UTF-8: one in a message would make the
    turn unwritable, and a hook that fails on it fails again on every later turn
    of the session. Two halves of a pair become the character they spell.
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _get(obj: object, key: str) -> object:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _head(text: str, limit: int) -> str:
    """The longest start of ``text`` within ``limit`` bytes, never splitting a character."""
    data = text[:limit].encode("utf-8", "surrogatepass")[:limit]
    return data.decode("utf-8", "ignore")


def _tail(text: str, limit: int) -> str:
    """The longest end of ``text`` within ``limit`` bytes, never splitting a character."""
    if limit <= 0:
        return ""
    data = text[-limit:].encode("utf-8", "surrogatepass")[-limit:]
    return data.decode("utf-8", "ignore")


def _cut(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` (bytes), saying what was cut."""
    if len(text) <= limit // 4 or _size(text) <= limit:
        return text
    keep = max(limit - 48, 0)
    head, tail = _head(text, keep * 2 // 3), _tail(text, keep // 3)
    cut = len(text) - len(head) - len(tail)
    return f"{head} […{cut} characters cut…] {tail}"


def _identity(text: str) -> str:
    return text


# A secret shorter than the margin that straddles a cut lies wholly inside the window
# that is redacted: a long text is redacted near its cuts, not in full, so the cost
# stays bounded. The long kinds (a 4096-bit RSA key in PEM is ~3.3 KB, a JWT can be
# a few KB) get the wide margin; <private> blocks are found over the whole text first.
_MARGIN = 1024
_WIDE_MARGIN = 8 * 1024


def _redact_cut(text: str, limit: int, redact: Callable[[str], str]) -> str:
    """``_cut(redact(text), limit)``, redacting only the parts of a long text that are kept."""
    keep = max(limit - 48, 0)
    head_bytes, tail_bytes = keep * 2 // 3, keep // 3
    margin = _WIDE_MARGIN if "-----BEGIN" in text or "eyJ" in text else _MARGIN
    if len(text) <= head_bytes + tail_bytes + 2 * margin:
        return _cut(redact(text), limit)
    # Characters: a window of n characters holds at least n bytes.
    head = _head(redact(text[: head_bytes + margin]), head_bytes)
    tail = _tail(redact(text[-(tail_bytes + margin) :]), tail_bytes)
    cut = len(text) - len(head) - len(tail)
    return f"{head} […{cut} characters cut…] {tail}"


def _block_text(block: object, limits: TurnLimits, redactor: Redactor | None) -> str | None:
    kind = _get(block, "type")
    if kind == "text":
        text = _get(block, "text")
        return text if isinstance(text, str) else None
    if not limits.include_tools:
        return None
    if kind in ("tool_use", "server_tool_use"):
        raw = _get(block, "input")
        try:
            args = json.dumps(raw, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            args = str(raw)
        excerpt = _tool_excerpt(args, limits, redactor)
        return f"[tool call {_get(block, 'name')}: {excerpt}]"
    if kind == "tool_result":
        content = _get(block, "content")
        if isinstance(content, list):
            parts = [_get(b, "text") for b in content if _get(b, "type") == "text"]
            content = "\n".join(p for p in parts if isinstance(p, str))
        if not isinstance(content, str):
            return None
        error = " (error)" if _get(block, "is_error") else ""
        return f"[tool result{error}: {_tool_excerpt(content, limits, redactor)}]"
    return None  # thinking, images, documents: nothing a note should be made of


def _tool_excerpt(text: str, limits: TurnLimits, redactor: Redactor | None) -> str:
    if redactor is None:
        return _cut(text, limits.tool_excerpt_bytes)
    # Private blocks over the whole output first: a tag may lie outside what is kept.
    text = redactor.strip_private_many([text])[0]
    return _redact_cut(text, limits.tool_excerpt_bytes, redactor.redact_secrets)


def _content_text(content: object, limits: TurnLimits, redactor: Redactor | None) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable) and not isinstance(content, (bytes, Mapping)):
        parts = [_block_text(block, limits, redactor) for block in content]
        return "\n".join(p for p in parts if p)
    return ""


def from_messages(
    messages: Iterable[object],
    limits: TurnLimits | None = None,
    *,
    redactor: Redactor | None = None,
) -> list[Message]:
    """The turn's messages as (role, text), empty ones dropped, each redacted, then cut to size.

    Lone surrogates become U+FFFD first (see :func:`scrub`).

    With a ``redactor``, every message is redacted whole before anything is
    cut (a ``<private>`` block may span messages).

    Raises:
        TypeError: ``messages`` is not an iterable of messages with a role.
    """
    limits = limits or TurnLimits()
    raw: list[tuple[str, str]] = []
    for message in messages:
        role = _get(message, "role")
        if not isinstance(role, str) or not role:
            raise TypeError(f"a message needs a 'role' string, got {message!r:.80}")
        text = scrub(_content_text(_get(message, "content"), limits, redactor))
        raw.append((scrub(role), text))
    texts = [t for _, t in raw]
    secrets = _identity
    if redactor is not None:
        # Private blocks over the whole turn (they may span messages), then secrets
        # over what is kept of each message, before it is cut.
        texts = redactor.strip_private_many(texts)
        secrets = redactor.redact_secrets
    out: list[Message] = []
    for (role, _), text in zip(raw, texts, strict=True):
        text = text.strip()
        if text:
            out.append(Message(role=role, text=_redact_cut(text, limits.message_bytes, secrets)))
    return _bound(out, limits.turn_bytes)


def _bound(messages: list[Message], limit: int) -> list[Message]:
    """Drop messages from the middle until the turn fits, keeping the first and the latest."""
    sizes = [_size(m.text) for m in messages]
    if sum(sizes) <= limit or len(messages) <= 2:
        return messages
    first, rest = messages[0], messages[1:]
    kept: list[Message] = []
    budget = limit - sizes[0]
    for message, size in zip(reversed(rest), reversed(sizes[1:]), strict=True):
        if size > budget:
            break
        kept.append(message)
        budget -= size
    dropped = len(rest) - len(kept)
    note = Message(role="note", text=f"[{dropped} messages of this turn left out for length]")
    return [first, note, *reversed(kept)]


def render(messages: Iterable[Message]) -> str:
    """The turn as the prompt shows it: a ``role=...`` line, then the text, per message."""
    return "".join(f"role={m.role}\n{m.text}\n" for m in messages)


def estimate_tokens(text: str) -> int:
    """A rough token count: a CJK character is about one token, other text about four characters."""
    wide = sum(1 for ch in text if ord(ch) >= 0x2E80)
    return wide + (len(text) - wide + 3) // 4


# What a person says to keep the agent going, and nothing more (whole message, any case).
_ACK = re.compile(
    r"(?:(?:ok(?:ay)?|k|yes|yep|yeah|sure|no|nope|thanks?(?: you)?|thx|ty|cool|nice|great|good"
    r"|perfect|fine|done|lgtm|go(?: on| ahead)?|continue|proceed|do it|sounds good"
    r"|got it|right|correct|please|pls|awesome|excellent|继续|好的?|好吧|行|可以|嗯+|是的?|对"
    r"|谢谢|多谢|收到|没问题|明白了?|知道了|下一步|开始吧?|👍|🙏|✅)"
    r"[\s.,!?;:~，。！？、…]*)+",
    re.IGNORECASE,
)
_TOOL_LINE = re.compile(r"^\[tool (?:call|result)[^\n]*$", re.M)
#: An assistant that said less than this (tool excerpts aside) said nothing worth a call.
ASSISTANT_CHURN_CHARS = 280


def worth_a_call(messages: Iterable[Message]) -> bool:
    """Whether a turn may hold something worth a model call.

    No: when no user message says more than an acknowledgement ("ok", "thanks",
    "继续") and the assistant said almost nothing beyond tool calls and results
    (under :data:`ASSISTANT_CHURN_CHARS` characters). Anything else is worth one.
    """
    said = 0
    for message in messages:
        text = message.text.strip()
        if message.role == "user":
            if text and not _ACK.fullmatch(_TOOL_LINE.sub("", text).strip() or "ok"):
                return True
        elif message.role == "assistant":
            said += len(_TOOL_LINE.sub("", text).strip())
    return said >= ASSISTANT_CHURN_CHARS
