"""Recall: finding the notes that answer a question, over both stores.

May import the floors below it: ``mdmem.store``, ``mdmem.extract`` and the kernel.

- ``text``: text into search terms (stemming, identifiers, CJK n-grams);
- ``fts``: the derived SQLite FTS5 index of one store, kept in its state folder;
- ``engine``: ranking over several stores, the budgeted block;
- ``semantic``: the optional embedding model (``mdmem[semantic]``) and its cached vectors;
- ``embedder``: computes those vectors, in the background or for ``mdmem embed``;
- ``probe``: how well a store's notes can be found (``mdmem eval recall``).

The light functions here need no Manager, so a cold hook process can call them.
"""

from __future__ import annotations

from mdmem.recall.engine import estimate_tokens, recall, recall_block, search
from mdmem.store.hit import Hit

__all__ = ["Hit", "estimate_tokens", "recall", "recall_block", "search"]
