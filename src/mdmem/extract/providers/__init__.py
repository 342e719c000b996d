"""Model providers: the Protocol in ``base``; Anthropic, OpenAI-compatible, Claude Code, offline.

Each SDK is imported only by its own provider module, and only when a turn is
processed: choosing a provider imports nothing heavy.

How the provider is chosen (:func:`choose`), first match wins:

1. ``MDMEM_PROVIDER`` names one: ``anthropic``, ``openai``, ``claude-code`` or
   ``offline`` (``claude_code`` and ``claude`` are accepted too).
2. ``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN`` is set: ``anthropic``.
3. ``MDMEM_OPENAI_BASE_URL``, ``OPENAI_BASE_URL`` or ``OPENAI_API_KEY`` is set:
   ``openai`` (a local server such as Ollama needs only the base URL).
4. The user chose their Claude Code login once (``mdmem install claude-code
   --use-login``, recorded in mdmem's state: :func:`login_choice`) and the
   ``claude`` command is on ``PATH`` (or ``MDMEM_CLAUDE`` names it): ``claude-code``.
5. Otherwise ``offline``: no model; explicit requests, corrections and stated facts.

An API key always wins over the Claude Code login, because a key is what the
user set up for programs to use. The login is never chosen just because
``claude`` is installed: every turn would then spend the user's subscription
without their saying so. ``choose`` says, in its reason, how to opt in.
"""

from __future__ import annotations

import os

# The SessionStart hook asks `choose` for the block's footer: this module must
# import nothing heavy (no typing, dataclasses, shutil), so the names of
# `base` are loaded on first use.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from mdmem.extract.providers.base import Answer, ExtractionRequest, Message, Provider, Usage

__all__ = [
    "NAMES",
    "Answer",
    "ExtractionRequest",
    "Message",
    "Provider",
    "Usage",
    "choose",
    "claude_installed",
    "default_provider",
    "login_choice",
    "login_decided",
    "make",
    "set_login_choice",
]

NAMES = ("anthropic", "openai", "claude-code", "offline")
_BASE_NAMES = ("Answer", "ExtractionRequest", "Message", "Provider", "Usage")


def __getattr__(name: str) -> object:
    if name in _BASE_NAMES:
        from mdmem.extract.providers import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _which(name: str) -> str | None:
    """``shutil.which`` for an executable name or path, without importing shutil."""
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


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
    chosen = login_choice()
    if chosen:
        claude = claude_installed()
        if claude:
            return "claude-code", f"you chose your Claude Code login ({chosen}; {claude})"
        return "offline", f"you chose your Claude Code login ({chosen}), but claude is not on PATH"
    if claude_installed():
        return "offline", (
            "no API key is set; Claude Code is installed, but using your subscription is "
            "opt-in: `mdmem install claude-code --use-login` or MDMEM_PROVIDER=claude-code"
        )
    return "offline", "no API key is set and the claude command is not on PATH"


def claude_installed() -> str | None:
    """The Claude Code executable (``MDMEM_CLAUDE``, else ``claude`` on ``PATH``), or None."""
    return _which(os.environ.get("MDMEM_CLAUDE") or "claude")


_CHOICE_FILE = "provider.json"


def _state_base() -> str:
    # The same folder as mdmem.store.paths.state_base (a floor above this one, so not
    # imported here); tests/extract/providers/test_providers.py checks the two agree.
    env = os.environ.get("MDMEM_STATE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "mdmem")
    return os.path.join(os.path.expanduser("~"), ".local", "state", "mdmem")


def login_choice() -> str | None:
    """When the user chose their Claude Code login for extraction (an ISO time), or None."""
    path = os.path.join(_state_base(), _CHOICE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(4096)
    except OSError:
        return None
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("provider") == "claude-code":
        return str(data.get("chosen") or "recorded")
    return None


def login_decided() -> bool:
    """Whether the user answered, either way, whether to extract with their Claude Code login."""
    return os.path.isfile(os.path.join(_state_base(), _CHOICE_FILE))


def set_login_choice(use: bool) -> str:
    """Record the user's answer: extract with the Claude Code login (``use``) or not.

    A "no" is recorded too, so mdmem asks once. Returns the file.

    Raises:
        OSError: mdmem's state folder cannot be written.
    """
    import json
    from datetime import datetime, timezone

    base = _state_base()
    path = os.path.join(base, _CHOICE_FILE)
    os.makedirs(base, mode=0o700, exist_ok=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    data = {
        "provider": "claude-code" if use else "offline",
        "chosen": stamp,
        "via": "mdmem install claude-code",
    }
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(data) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


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
