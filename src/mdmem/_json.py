"""JSON from input mdmem does not control (hook stdin, transcripts, a repository's files).

``json.loads`` raises :class:`RecursionError` for deeply nested input (a few KB
of ``[``), and a ``RecursionError`` is no ``ValueError``: every ``except
ValueError`` around a plain ``json.loads`` lets it through, and a committed
4 KB file of brackets would stop the hooks. :func:`loads` makes it a
``ValueError`` like any other invalid JSON.

Floor 0: nothing of mdmem is imported here.
"""

from __future__ import annotations

import json

__all__ = ["loads"]


def loads(data: str | bytes) -> object:
    """``json.loads``, with input nested too deeply refused as invalid.

    Raises:
        ValueError: not JSON, not UTF-8, or nested too deeply.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
