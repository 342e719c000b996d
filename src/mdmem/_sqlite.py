"""SQLite for the modules on the per-prompt hook's path: the C module itself.

``import sqlite3`` imports the package, whose ``dbapi2`` also imports ``datetime``
(for default adapters mdmem never uses: it stores times as numbers), about a
millisecond of a process that needs neither. ``_sqlite3`` is the module the
package re-exports, the same classes and errors; where an interpreter has no
such module, the package.
"""

from __future__ import annotations

try:
    import _sqlite3 as sqlite3
except ImportError:  # pragma: no cover - CPython and PyPy both have it
    import sqlite3  # type: ignore[no-redef]

__all__ = ["sqlite3"]
