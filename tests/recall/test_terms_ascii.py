"""An ASCII text's search terms are the ones the general path gives it.

``recall/text.terms`` takes ASCII text (most notes) by a path of its own: no NFKC
(ASCII is its own normal form), no CJK runs, each chunk a word. Held here to the
general path on any ASCII text, clitics and identifiers included.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mdmem.recall import text

# ASCII, with what a chunk may hold inside (./-:@#+), what ends one, and clitics.
ASCII_TEXTS = st.lists(
    st.one_of(
        st.sampled_from(["it's", "I'll", "don't", "camelCase", "a.b", "x-y", "v2.1", "__", "the"]),
        st.characters(codec="ascii"),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(ASCII_TEXTS)
def test_an_ascii_text_has_the_terms_of_the_general_path(value: str) -> None:
    # terms() takes ASCII text by a path of its own (no NFKC, no CJK runs); the same text
    # with a word of another script after it goes the general way: the same terms, then it.
    assert text.terms(value + " é") == [*text.terms(value), "é"]
