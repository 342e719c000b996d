"""HTML with escaping by default: a ``Markup`` string type and templates that escape what they fill.

Plain ``str.format`` templates, where every value is escaped unless it is
already :class:`Markup` (HTML this package built). No template engine: the
pages are few and small, and an engine would be one more dependency to
trust with escaping.
"""

from __future__ import annotations

from html import escape as _escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["Markup", "attrs", "escape", "fill", "join"]


class Markup(str):
    """Text that is already safe HTML; :func:`fill` and :func:`escape` leave it as it is."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """``value`` as HTML text: ``& < > " '`` escaped, unless it is Markup already."""
    if isinstance(value, Markup):
        return value
    return Markup(_escape("" if value is None else str(value), quote=True))


def fill(template: str, /, **values: object) -> Markup:
    """``template`` with its ``{name}`` fields replaced by the escaped ``values``."""
    return Markup(template.format_map({k: escape(v) for k, v in values.items()}))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    """The parts, escaped unless Markup, one after another."""
    return Markup(sep.join(escape(p) for p in parts))


def attrs(**values: object) -> Markup:
    """HTML attributes: ``name="value"`` escaped; True gives a bare name, False/None nothing."""
    out = []
    for name, value in values.items():
        key = name.rstrip("_").replace("_", "-")
        if value is True:
            out.append(f" {key}")
        elif value is not None and value is not False:
            out.append(f' {key}="{escape(value)}"')
    return Markup("".join(out))
