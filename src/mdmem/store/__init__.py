"""The store: Markdown notes on disk and everything that keeps them safe.

Paths and the one validator, atomic writes, notes, operations, the planner, the
batch journal, the catalog, the prompt block, the MEMORY.md merge. May import
``mdmem.errors``, ``mdmem._kinds`` and ``mdmem.extract`` (for redaction).
"""
