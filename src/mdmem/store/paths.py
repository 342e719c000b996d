"""Where stores live, and the one validator of note names.

Every piece of mdmem that turns a name into a file path goes through
:func:`check_name` (lexical rules) and :func:`note_path` (lexical rules plus
what the file system says). Nothing else validates note names again.

Only ``os`` and ``unicodedata`` are imported here: this module is on the path
of ``mdmem index``, which a coding-agent hook runs at every session start.
"""

from __future__ import annotations

import os
import stat
import unicodedata

from mdmem.errors import InvalidPath

__all__ = [
    "INDEX_NAME",
    "MAX_NAME_BYTES",
    "MAX_SLUG_CHARS",
    "STATE_DIR",
    "check_name",
    "discover_workspace",
    "is_candidate_name",
    "is_plain_name",
    "note_path",
    "project_root",
    "slugify",
    "state_base",
    "state_dir",
    "user_root",
]

INDEX_NAME = "MEMORY.md"
# The name of the state folder older versions kept inside a store. mdmem never
# reads, follows or writes it now (a repository could commit it); doctor reports it.
STATE_DIR = ".mdmem"
MAX_NAME_BYTES = 120
MAX_SLUG_CHARS = 60
# A slug must leave room in MAX_NAME_BYTES for the longest type prefix
# ("correction_feedback_"), a collision suffix ("-999") and ".md".
_MAX_SLUG_BYTES = MAX_NAME_BYTES - len("correction_feedback_") - len("-999") - len(".md")

# Characters Windows cannot store, so a note that has them cannot be shared
# through git with a teammate on Windows; parentheses delimit the file name
# at the end of a MEMORY.md line.
_FORBIDDEN_CHARS = frozenset('<>:"|?*()')
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"]
    + [f"com{i}" for i in range(1, 10)]
    + [f"lpt{i}" for i in range(1, 10)]
)
# Bidirectional overrides make a name display as something it is not.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def _name_problem(name: object) -> str | None:
    """Return why ``name`` is not a bare note name, or None when it is."""
    if not isinstance(name, str):
        return "a note name must be text"
    if not name:
        return "empty name"
    if name in (".", ".."):
        return "not a file name"
    if "/" in name or "\\" in name:
        return "must be a bare file name, without '/' or '\\'"
    if "\x00" in name:
        return "contains a NUL character"
    for ch in name:
        category = unicodedata.category(ch)
        if category in ("Cc", "Zl", "Zp") or ch in _BIDI_CONTROLS:
            return f"contains the control character U+{ord(ch):04X}"
    if len(name) >= 2 and name[1] == ":" and name[0].isascii() and name[0].isalpha():
        return "looks like a drive path"
    if name.startswith("."):
        return "hidden names are not notes"
    if name.strip() != name:
        return "leading or trailing white space"
    if name.casefold() == INDEX_NAME.casefold():
        return "MEMORY.md is the index, not a note"
    if not name.endswith(".md"):
        return "a note name must end in '.md'"
    bad = sorted(set(name) & _FORBIDDEN_CHARS)
    if bad:
        return f"contains {''.join(bad)!r}, which cannot appear in a note name"
    stem = name[:-3]
    if stem.endswith((" ", ".")):
        return "the name before '.md' ends in a space or a dot"
    if stem.split(".")[0].lower() in _WINDOWS_DEVICES:
        return "a reserved device name on Windows"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"longer than {MAX_NAME_BYTES} bytes"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "not valid Unicode"
    return None


_INDEX_FOLDED = INDEX_NAME.casefold()
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def is_plain_name(name: str) -> bool:
    """A fast yes for the common case: a short ASCII name that the full check would accept.

    False means "ask :func:`check_name`", not "invalid".
    """
    return (
        len(name) <= MAX_NAME_BYTES
        and name.endswith(".md")
        and not name.startswith(".")
        and not name[:-3].endswith(".")
        and _PLAIN.issuperset(name)
        and name.casefold() != INDEX_NAME.casefold()
        and name[:-3].split(".")[0].lower() not in _WINDOWS_DEVICES
    )


def check_name(name: object) -> str:
    """Return ``name`` if it is a bare note name (``*.md``, no path), by lexical rules alone.

    Raises:
        InvalidPath: the name is empty, has a separator, a control character,
            is hidden, is MEMORY.md, does not end in ``.md``, is too long, ...
    """
    problem = _name_problem(name)
    if problem is not None:
        raise InvalidPath(name if isinstance(name, str) else repr(name), problem)
    assert isinstance(name, str)
    return name


def is_candidate_name(name: str) -> bool:
    """Whether a directory entry is meant as a note: ``*.md``, not hidden, not MEMORY.md."""
    # A name that case-folds to "memory.md" has at most its nine characters.
    return (
        name.endswith(".md")
        and not name.startswith(".")
        and (len(name) > len(INDEX_NAME) or name.casefold() != _INDEX_FOLDED)
    )


def note_path(root: str, name: object, *, must_exist: bool = False) -> str:
    """Return the path of note ``name`` inside the store at ``root``, after checking it.

    Beyond :func:`check_name`, an existing entry must be a regular file, and a
    symlink must resolve to a regular file inside the store.

    Raises:
        InvalidPath: the name is not a note name, or the file escapes the store
            or is not a regular file.
        FileNotFoundError: ``must_exist`` and there is no such note.
    """
    checked = check_name(name)
    path = os.path.join(root, checked)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if must_exist:
            raise
        return path
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(path)
        real_root = os.path.realpath(root)
        if os.path.commonpath([real, real_root]) != real_root or real == real_root:
            raise InvalidPath(checked, "a symlink that leads outside the store")
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise InvalidPath(checked, "a dangling symlink") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidPath(checked, "not a regular file")
    return path


def slugify(text: str) -> str:
    """Turn a title into a file-name slug: lowercase, ``[-\\w]`` only, at most 60 characters.

    Unicode-aware, so a Chinese title gives a readable Chinese slug; never empty.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[str] = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch.isalnum() or ch == "_" or (category.startswith("M") and out and out[-1] != "-"):
            out.append(ch)
        elif out and out[-1] != "-":
            out.append("-")
    slug = "".join(out).strip("-_")
    # Cut by characters, then by bytes, so a slug of wide characters still fits a name.
    slug = slug[:MAX_SLUG_CHARS]
    while len(slug.encode("utf-8")) > _MAX_SLUG_BYTES:
        slug = slug[:-1]
    slug = slug.strip("-_")
    return unicodedata.normalize("NFC", slug) or "note"


def state_base() -> str:
    """Where mdmem keeps its own state: ``$MDMEM_STATE_DIR``, else ``$XDG_STATE_HOME/mdmem``,
    else ``~/.local/state/mdmem``. Never inside a repository; private to the user."""
    env = os.environ.get("MDMEM_STATE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative value is to be ignored
        return os.path.join(xdg, "mdmem")
    return os.path.join(os.path.expanduser("~"), ".local", "state", "mdmem")


def state_dir(root: str) -> str:
    """The state folder of the store at ``root`` (catalog, journals, trash, locks, logs).

    Keyed by the store's resolved path, so two spellings of one store share
    their state and lock, and named after its workspace so a person can find
    it: ``<state_base>/stores/<workspace name>-<hash>``. Nothing is created here.
    """
    try:  # hashlib costs milliseconds to import (OpenSSL) on the `mdmem index` path
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - interpreters without the _blake2 module
        from hashlib import blake2b

    real = os.path.realpath(root)
    digest = blake2b(real.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
    parent = os.path.dirname(real)
    in_workspace = os.path.basename(parent) == ".PseudoClaude"
    owner = os.path.basename(os.path.dirname(parent) if in_workspace else real)
    label = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_.") else "-" for ch in owner)
    label = label.strip("-.")[:40] or "store"
    return os.path.join(state_base(), "stores", f"{label}-{digest}")


def user_root() -> str:
    """The user store: ``$MDMEM_USER_DIR`` if set, else ``~/.PseudoClaude/memory``."""
    env = os.environ.get("MDMEM_USER_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.expanduser("~"), ".PseudoClaude", "memory")


def project_root(workspace: str) -> str:
    """The project store of a workspace: ``<workspace>/.PseudoClaude/memory``."""
    return os.path.join(os.path.abspath(workspace), ".PseudoClaude", "memory")


def discover_workspace(start: str = ".", *, user_store: str | None = None) -> str:
    """The nearest ancestor of ``start`` holding ``.PseudoClaude/`` or ``.git``, else ``start``.

    A ``.PseudoClaude/`` that only holds the user store (as ``~/.PseudoClaude``
    does) does not make a workspace; otherwise every directory under the home
    directory would share the user store as its project store.
    """
    start = os.path.abspath(start)
    user_parent = os.path.realpath(os.path.dirname(user_store or user_root()))
    current = start
    while True:
        marker = os.path.join(current, ".PseudoClaude")
        if os.path.isdir(marker) and os.path.realpath(marker) != user_parent:
            return current
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return start
        current = parent
