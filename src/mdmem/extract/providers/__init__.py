"""Model providers: the Protocol in ``base``, Anthropic, and an offline fallback.

Only :mod:`mdmem.extract.providers.anthropic` imports the ``anthropic`` SDK, and only
when a turn is processed.
"""

from __future__ import annotations

import os

from mdmem.extract.providers.base import Answer, ExtractionRequest, Message, Provider

__all__ = ["Answer", "ExtractionRequest", "Message", "Provider", "default_provider"]


def default_provider() -> Provider:
    """Anthropic when a key or token is set (or ``MDMEM_PROVIDER=anthropic``), else offline.

    ``MDMEM_PROVIDER=offline`` forces the offline provider even with a key.
    """
    choice = os.environ.get("MDMEM_PROVIDER", "").strip().lower()
    has_key = bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))
    if choice == "anthropic" or (choice != "offline" and has_key):
        from mdmem.extract.providers.anthropic import AnthropicProvider

        return AnthropicProvider()
    from mdmem.extract.providers.offline import OfflineProvider

    return OfflineProvider()
