"""A small, safe Markdown to HTML renderer for reading notes in the web page.

Everything a note says is escaped; the only tags in the output are the ones
this module writes (headings, paragraphs, lists, block quotes, rules, code,
emphasis, links), and a link is kept only when it points at ``http://`` or
``https://``. Raw HTML in a note is shown as text, never passed through: a
note is written by a model from a conversation, so it is hostile data.

Supported: ATX headings (shifted down one level, the page's ``<h1>`` is the
note's title), paragraphs, ``-``/``*``/``+`` and numbered lists (nested by
indentation), ``>`` block quotes, fenced code blocks, horizontal rules, code
spans, ``**strong**``, ``*emphasis*``/``_emphasis_``, ``[text](url)`` and
``<https://...>`` links.
"""

from __future__ import annotations

import re
from html import escape

__all__ = ["ALLOWED_TAGS", "render", "safe_url"]

# The only tags render() writes.
ALLOWED_TAGS = frozenset(
    {"h2", "h3", "h4", "h5", "h6", "p", "ul", "ol", "li", "blockquote", "pre", "code", "hr"}
    | {"strong", "em", "a"}
)

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_BULLET = re.compile(r"^( {0,3})([-*+])(?:[ \t]+(.*))?$")
_NUMBER = re.compile(r"^( {0,3})(\d{1,9})[.)](?:[ \t]+(.*))?$")
_QUOTE = re.compile(r"^ {0,3}> ?(.*)$")
_LANG = re.compile(r"[^A-Za-z0-9_+-]")
_URL = re.compile(r"^https?://[^\s\x00-\x1f\x7f<>\"'`\\]+$", re.IGNORECASE)
_MAX_DEPTH = 12

_INLINE = re.compile(
    r"""
    (?P<code>(?P<ticks>`+)(?P<code_text>.+?)(?<!`)(?P=ticks)(?!`))
  | (?P<link>\[(?P<link_text>(?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]
        \((?P<link_url>[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:[ \t]+"(?P<link_title>[^"]*)")?\))
  | (?P<auto><(?P<auto_url>https?://[^\s<>]+)>)
  | (?P<strong>\*\*(?P<strong_a>[^\s*](?:.*?[^\s*])?)\*\*
              | (?<![^\W_])__(?P<strong_b>[^\s_](?:.*?[^\s_])?)__(?![^\W_]))
  | (?P<em>\*(?P<em_a>[^\s*](?:[^*]*?[^\s*])?)\*
          | (?<![^\W_])_(?P<em_b>[^\s_](?:[^_]*?[^\s_])?)_(?![^\W_]))
  | (?P<escaped>\\(?P<escaped_char>[!-/:-@\[-`{-~]))
    """,
    re.VERBOSE | re.DOTALL,
)


def safe_url(url: str) -> str | None:
    """``url`` if it is an absolute http(s) URL without spaces, quotes or controls; else None."""
    return url if _URL.match(url) else None


def _e(text: str) -> str:
    return escape(text, quote=True)


def _inline(text: str, *, links: bool = True, depth: int = 0) -> str:
    """Escape ``text`` and render its code spans, emphasis and links."""
    if depth > _MAX_DEPTH:
        return _e(text)
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        kind = match.lastgroup
        piece = match.group()
        inner = ""
        if kind == "code":
            code = match["code_text"]
            if code.strip() and code.startswith(" ") and code.endswith(" "):
                code = code[1:-1]
            inner = f"<code>{_e(code)}</code>"
        elif kind == "link":
            url = safe_url(match["link_url"])
            label = _inline(match["link_text"], links=False, depth=depth + 1)
            if not links or url is None:
                # Not a link we follow: show what was written, as text.
                inner = _inline(match["link_text"], links=False, depth=depth + 1)
                if url is None and match["link_url"]:
                    inner += f" ({_e(match['link_url'])})"
            else:
                title = match["link_title"]
                attr = f' title="{_e(title)}"' if title else ""
                inner = f'<a href="{_e(url)}"{attr} rel="noopener noreferrer nofollow">{label}</a>'
        elif kind == "auto":
            url = safe_url(match["auto_url"])
            if not links or url is None:
                inner = _e(piece)
            else:
                inner = f'<a href="{_e(url)}" rel="noopener noreferrer nofollow">{_e(url)}</a>'
        elif kind == "strong":
            body = match["strong_a"] if match["strong_a"] is not None else match["strong_b"]
            inner = f"<strong>{_inline(body, links=links, depth=depth + 1)}</strong>"
        elif kind == "em":
            body = match["em_a"] if match["em_a"] is not None else match["em_b"]
            inner = f"<em>{_inline(body, links=links, depth=depth + 1)}</em>"
        else:  # a backslash escape: the character itself, as text
            inner = _e(match["escaped_char"])
        out.append(_e(text[pos : match.start()]))
        out.append(inner)
        pos = match.end()
    out.append(_e(text[pos:]))
    return "".join(out)


def _indent(line: str) -> int:
    expanded = line.expandtabs(4)
    return len(expanded) - len(expanded.lstrip(" "))


def _dedent(line: str, width: int) -> str:
    expanded = line.expandtabs(4)
    cut = min(width, _indent(expanded))
    return expanded[cut:]


def _list_item(line: str) -> tuple[str, int, int, str] | None:
    """(kind, start number, content column, first line) of a list item line, or None."""
    bullet = _BULLET.match(line)
    if bullet:
        lead, marker, rest = bullet.group(1), bullet.group(2), bullet.group(3) or ""
        return "ul", 1, len(lead) + len(marker) + 1, rest
    number = _NUMBER.match(line)
    if number:
        lead, digits, rest = number.group(1), number.group(2), number.group(3) or ""
        return "ol", int(digits), len(lead) + len(digits) + 2, rest
    return None


def _blocks(lines: list[str], depth: int) -> list[str]:
    if depth > _MAX_DEPTH:
        return [f"<p>{_e(' '.join(line.strip() for line in lines))}</p>"] if lines else []
    out: list[str] = []
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            lang = _LANG.sub("", fence.group(2))[:30]
            code: list[str] = []
            i += 1
            while i < n and not lines[i].strip().startswith(marker[0] * len(marker)):
                code.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end of the note)
            attr = f' class="language-{lang}"' if lang else ""
            body = _e("\n".join(code))
            out.append(f"<pre><code{attr}>{body}</code></pre>")
            continue
        heading = _HEADING.match(line)
        if heading:
            level = min(6, len(heading.group(1)) + 1)
            out.append(f"<h{level}>{_inline(heading.group(2) or '', depth=depth)}</h{level}>")
            i += 1
            continue
        if _RULE.match(line):
            out.append("<hr>")
            i += 1
            continue
        if _QUOTE.match(line):
            quoted: list[str] = []
            while i < n and lines[i].strip():
                match = _QUOTE.match(lines[i])
                quoted.append(match.group(1) if match else lines[i])
                i += 1
            inner = "".join(_blocks(quoted, depth + 1))
            out.append(f"<blockquote>{inner}</blockquote>")
            continue
        item = _list_item(line)
        if item:
            i = _list(lines, i, item[0], depth, out)
            continue
        paragraph: list[str] = []
        while i < n and lines[i].strip():
            current = lines[i]
            if paragraph and (
                _FENCE.match(current)
                or _HEADING.match(current)
                or _QUOTE.match(current)
                or _list_item(current)
                or _RULE.match(current)
            ):
                break
            paragraph.append(current.strip())
            i += 1
        out.append(f"<p>{_inline(chr(10).join(paragraph), depth=depth)}</p>")
    return out


def _list(lines: list[str], i: int, kind: str, depth: int, out: list[str]) -> int:
    """Render the list starting at ``lines[i]`` into ``out``; return the index after it."""
    n = len(lines)
    first = _list_item(lines[i])
    assert first is not None
    start = first[1]
    items: list[list[str]] = []
    while i < n:
        item = _list_item(lines[i])
        if item is None or item[0] != kind:
            break
        _, _, column, rest = item
        body = [rest]
        i += 1
        while i < n:
            current = lines[i]
            if not current.strip():
                # A blank line ends the item unless indented content follows.
                if i + 1 < n and lines[i + 1].strip() and _indent(lines[i + 1]) >= column:
                    body.append("")
                    i += 1
                    continue
                break
            if _indent(current) >= column:
                body.append(_dedent(current, column))
            elif _list_item(current) or _FENCE.match(current) or _HEADING.match(current):
                break
            elif _indent(current) > 0 or (body and body[-1].strip()):
                body.append(current.strip())  # a lazy continuation line
            else:
                break
            i += 1
        items.append(body)
        while i < n and not lines[i].strip():
            following = _list_item(lines[i + 1]) if i + 1 < n else None
            if following is None or following[0] != kind:
                break
            i += 1
    rendered = []
    for body in items:
        blocks = _blocks(body, depth + 1)
        # A single paragraph in an item reads better without its <p>.
        if len(blocks) >= 1 and blocks[0].startswith("<p>") and blocks[0].endswith("</p>"):
            blocks[0] = blocks[0][3:-4]
        rendered.append(f"<li>{''.join(blocks)}</li>")
    attr = f' start="{start}"' if kind == "ol" and start != 1 else ""
    out.append(f"<{kind}{attr}>{''.join(rendered)}</{kind}>")
    return i


def render(text: str) -> str:
    """The HTML of a Markdown text: every character escaped, only known tags written."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd").split("\n")
    return "\n".join(_blocks(lines, 0))
