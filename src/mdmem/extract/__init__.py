"""Extraction: from a finished turn to the text a model sees and the answer it gives.

The turn, the extraction prompt and its template, the privacy filter, the model
providers. May import only ``mdmem.errors`` and ``mdmem._kinds``.
"""
