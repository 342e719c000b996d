"""Extraction: from a finished turn to the text a model sees and the answer it gives.

The turn, the extraction prompt and its template, the model providers. May
import only the ground floor: ``mdmem.errors``, ``mdmem._kinds`` and
``mdmem.privacy`` (the redaction filter, which the store uses too).
"""
