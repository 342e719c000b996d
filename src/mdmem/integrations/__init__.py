"""Integrations: Claude Code's hooks, the Anthropic memory tool and the MCP server.

May import every floor below (``manager``, ``recall``, ``store``, ``extract``, the
kernel), never ``cli`` or ``ui``. An adapter imports its SDK at module level, so
import one only where that SDK is wanted: ``import mdmem`` never loads any of them.
"""
