"""Adapters that plug mdmem's stores into agent tool protocols (the Anthropic memory tool, ...).

Each adapter imports its third-party SDK at module level, so import one only
where that SDK is wanted: ``import mdmem`` never loads any of them.
"""
