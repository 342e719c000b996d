"""Model providers: the Protocol in ``base``; Anthropic, OpenAI-compatible, Claude Code, offline.

Each SDK is imported only by its own provider module, and only when a turn is
processed: choosing a provider imports nothing heavy.

How the provider is chosen (:func:`choose`), first match wins:

1. ``MDMEM_PROVIDER`` names one: ``anthropic``, ``openai``, ``claude-code`` or
   ``offline`` (``claude_code`` and ``claude`` are accepted too).
2. ``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN`` is set: ``anthropic``.
3. ``MDMEM_OPENAI_BASE_URL``, ``OPENAI_BASE_URL`` or ``OPENAI_API_KEY`` is set:
   ``openai`` (a local server such as Ollama needs only the base URL).
4. The ``claude`` command is on ``PATH`` (or ``MDMEM_CLAUDE`` names it): ``claude-code``,
   which runs the extraction through the user's Claude Code login.
5. Otherwise ``offline``: no model, explicit requests only.

An API key always wins over the Claude Code login, because a key is what the
user set up for programs to use; the login is the way when it is the only one.
"""

from __future__ import annotations

import os

from mdmem.extract.providers.base import Answer, ExtractionRequest, Message, Provider, Usage

__all__ = [
    "NAMES",
    "Answer",
    "ExtractionRequest",
    "Message",
    "Provider",
    "Usage",
    "choose",
    "default_provider",
    "make",
]

NAMES = ("anthropic", "openai", "claude-code", "offline")
_ALIASES = {"claude_code": "claude-code", "claude": "claude-code", "claudecode": "claude-code"}


def choose() -> tuple[str, str]:
    """The provider the environment selects and why, as ``(name, reason)``; imports nothing.

    An unknown ``MDMEM_PROVIDER`` selects ``offline``, and the reason says so.
    """
    env = os.environ
    raw = env.get("MDMEM_PROVIDER", "").strip().lower()
    if raw:
        name = _ALIASES.get(raw, raw)
        if name in NAMES:
            return name, f"MDMEM_PROVIDER={raw}"
        return "offline", f"MDMEM_PROVIDER={raw!r} is not one of {', '.join(NAMES)}"
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        if env.get(key):
            return "anthropic", f"{key} is set"
    for key in ("MDMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        if env.get(key):
            return "openai", f"{key} is set"
    from mdmem.extract.providers.claude_code import claude_command

    claude = claude_command()
    if claude:
        return "claude-code", f"no API key is set and Claude Code is installed ({claude})"
    return "offline", "no API key is set and the claude command is not on PATH"


def make(name: str) -> Provider:
    """A provider by name (one of :data:`NAMES`).

    Raises:
        ValueError: the name is not a provider's.
    """
    name = _ALIASES.get(name, name)
    if name == "anthropic":
        from mdmem.extract.providers.anthropic import AnthropicProvider

        return AnthropicProvider()
    if name == "openai":
        from mdmem.extract.providers.openai import OpenAIProvider

        return OpenAIProvider()
    if name == "claude-code":
        from mdmem.extract.providers.claude_code import ClaudeCodeProvider

        return ClaudeCodeProvider()
    if name == "offline":
        from mdmem.extract.providers.offline import OfflineProvider

        return OfflineProvider()
    raise ValueError(f"unknown provider {name!r}: expected one of {', '.join(NAMES)}")


def default_provider() -> Provider:
    """The provider :func:`choose` selects (see the module docstring for the order)."""
    return make(choose()[0])
