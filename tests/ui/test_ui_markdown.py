"""The web page's Markdown renderer: what it supports, and that nothing a note says gets through."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem.ui.html import Markup, attrs, escape, fill, join
from mdmem.ui.markdown import ALLOWED_TAGS, render, safe_url

CASES = [
    ("# Title", "<h2>Title</h2>"),
    ("###### deep ##", "<h6>deep</h6>"),
    ("one\ntwo\n\nthree", "<p>one\ntwo</p>\n<p>three</p>"),
    (
        "*em* and **strong** and _em_",
        "<p><em>em</em> and <strong>strong</strong> and <em>em</em></p>",
    ),
    ("snake_case_name", "<p>snake_case_name</p>"),
    ("`a <b> c`", "<p><code>a &lt;b&gt; c</code></p>"),
    ("`` a ` b ``", "<p><code>a ` b</code></p>"),
    ("- a\n- b", "<ul><li>a</li><li>b</li></ul>"),
    ("* a\n  * b\n  * c\n* d", "<ul><li>a<ul><li>b</li><li>c</li></ul></li><li>d</li></ul>"),
    ("3. c\n4. d", '<ol start="3"><li>c</li><li>d</li></ol>'),
    ("1) a\n2) b", "<ol><li>a</li><li>b</li></ol>"),
    ("> quoted\n> more", "<blockquote><p>quoted\nmore</p></blockquote>"),
    ("---", "<hr>"),
    (
        "```py\nif a < b:\n    pass\n```",
        '<pre><code class="language-py">if a &lt; b:\n    pass</code></pre>',
    ),
    ("~~~\nno end", "<pre><code>no end</code></pre>"),
    ("```\n**not bold**\n```", "<pre><code>**not bold**</code></pre>"),
    (
        "[site](https://example.org/a_(b)?x=1&y=2)",
        '<p><a href="https://example.org/a_(b)?x=1&amp;y=2" rel="noopener noreferrer nofollow">'
        "site</a></p>",
    ),
    (
        '[t](http://example.org "Title <x>")',
        '<p><a href="http://example.org" title="Title &lt;x&gt;" rel="noopener noreferrer '
        'nofollow">t</a></p>',
    ),
    (
        "<https://example.org>",
        '<p><a href="https://example.org" rel="noopener noreferrer nofollow">'
        "https://example.org</a></p>",
    ),
    ("[x](javascript:alert(1))", "<p>x (javascript:alert(1))</p>"),
    ("[x](data:text/html;base64,AAAA)", "<p>x (data:text/html;base64,AAAA)</p>"),
    ("[x](/etc/passwd)", "<p>x (/etc/passwd)</p>"),
    ("<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"),
    ('<img src=x onerror="alert(1)">', "<p>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</p>"),
    ("<javascript:alert(1)>", "<p>&lt;javascript:alert(1)&gt;</p>"),
    ("\\*not em\\*", "<p>*not em*</p>"),
    ("中文 **粗体** 和 `代码`", "<p>中文 <strong>粗体</strong> 和 <code>代码</code></p>"),
    ("# 标题", "<h2>标题</h2>"),
    ("a\x00b", "<p>a\ufffdb</p>"),
    ("", ""),
]


@pytest.mark.parametrize(("source", "html"), CASES)
def test_render(source: str, html: str) -> None:
    assert render(source) == html


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " https://x.org",
        "https://x.org/a b",
        "https://x.org/\"onmouseover='x'",
        "http://x.org/\x01",
        "//evil.example",
        "file:///etc/passwd",
        "vbscript:x",
        "https:",
    ],
)
def test_only_plain_http_urls_are_links(url: str) -> None:
    assert safe_url(url) is None
    assert "<a" not in render(f"[x]({url})")


class _Tags(HTMLParser):
    """Collects the tags and attributes of an HTML fragment, and checks they nest."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.stack: list[str] = []
        self.balanced = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag != "hr":
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.balanced = False


MARKDOWNISH = st.lists(
    st.sampled_from(
        [*"ab <>&\"'`*_-#>[]()!\\:/.\n\t 1", "http://", "https://x.org", "javascript:", "中"]
    ),
    max_size=120,
).map("".join)


@given(MARKDOWNISH | st.text(max_size=200))
def test_nothing_but_known_tags_and_http_links_come_out(source: str) -> None:
    html = render(source)
    parser = _Tags()
    parser.feed(html)
    parser.close()
    assert parser.balanced and parser.stack == [], html
    for tag, tag_attrs in parser.tags:
        assert tag in ALLOWED_TAGS, (tag, html)
        names = {name for name, _ in tag_attrs}
        if tag == "a":
            href = dict(tag_attrs)["href"] or ""
            assert href.startswith(("http://", "https://")), html
            assert names <= {"href", "title", "rel"}
        elif tag in ("ol", "code"):
            assert names <= {"start", "class"}
        else:
            assert not names, html
    # Every letter of the source is still there, as text (escaping loses nothing).
    text = "".join(ch for ch in source if ch.isalnum())
    shown = "".join(ch for ch in _text(html) if ch.isalnum())
    assert set(text) <= set(shown) | set("0123456789"), (source, html)


def _text(html: str) -> str:
    out: list[str] = []

    class Text(HTMLParser):
        def handle_data(self, data: str) -> None:
            out.append(data)

    parser = Text(convert_charrefs=True)
    parser.feed(html)
    parser.close()
    return "".join(out)


def test_templates_escape_what_they_fill() -> None:
    assert fill("<p>{x}</p>", x="<b>&'\"") == "<p>&lt;b&gt;&amp;&#x27;&quot;</p>"
    assert fill("<p>{x}</p>", x=Markup("<b>ok</b>")) == "<p><b>ok</b></p>"
    assert escape(None) == "" and isinstance(escape("x"), Markup)
    assert join(["<a>", Markup("<b>")]) == "&lt;a&gt;<b>"
    assert attrs(class_='x"y', selected=True, hidden=False, id=None) == ' class="x&quot;y" selected'
