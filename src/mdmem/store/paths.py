"""Where stores live, and the one validator of note names.

Every piece of mdmem that turns a name into a file path goes through
:func:`check_name` (lexical rules) and :func:`note_path` (lexical rules plus
what the file system says). Nothing else validates note names again.

A name that passed is a :class:`NoteName`: a ``str`` that carries its check with
it, so a write checks its name once, where the operation is validated, and the
planner, the reader and the writer downstream take it as it is (``check_name``
returns a ``NoteName`` unchanged; anything built from it, ``name + "x"`` or
``name.casefold()``, is a plain ``str`` again and is checked again).

Only ``os``, ``stat``, ``sys`` and ``unicodedata`` are imported here (and
``fcntl`` when a state folder is first looked up): this module is on the path of
``mdmem index``, which a coding-agent hook runs at every session start.
"""

from __future__ import annotations

import os
import stat
import sys
import unicodedata

from mdmem.errors import InvalidPath

TYPE_CHECKING = False  # typing costs milliseconds on the hook's path
if TYPE_CHECKING:
    from typing import TypeGuard

__all__ = [
    "INDEX_NAME",
    "IN_HOME",
    "IS_USER_STORE",
    "MAX_INDEX_BYTES",
    "MAX_NAME_BYTES",
    "MAX_SLUG_CHARS",
    "STATE_DIR",
    "NoteName",
    "anchor_identity",
    "check_name",
    "control_problem",
    "discover_workspace",
    "earlier_states",
    "is_candidate_name",
    "is_plain_name",
    "is_session_id",
    "locate_state",
    "note_path",
    "printable_name",
    "project_problem",
    "project_root",
    "slugify",
    "state_base",
    "state_dir",
    "user_root",
]

INDEX_NAME = "MEMORY.md"
_SESSION_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def is_session_id(session: object) -> TypeGuard[str]:
    """Whether ``session`` looks like a Claude Code session id, safe in a file name.

    What ``re.match(r"^[A-Za-z0-9_-]{1,100}$", session)`` accepts (``$`` lets one
    final newline through), without compiling a pattern: the per-prompt hook, a
    fresh process at every prompt, asks it of every session id it is given.
    """
    if not isinstance(session, str):
        return False
    word = session[:-1] if session.endswith("\n") else session
    return 1 <= len(word) <= 100 and _SESSION_CHARS.issuperset(word)


# MEMORY.md is derived, one short line per note (about 180 bytes): 100,000 notes take
# 18 MB, so the cap leaves room for a few hundred thousand.
MAX_INDEX_BYTES = 64 * 1024 * 1024
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
    # Printable ASCII has none of them (an ASCII control character is all that is not
    # printable there): only another name is looked at a character at a time.
    for ch in () if name.isascii() and name.isprintable() else name:
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


def printable_name(name: str) -> str:
    """A directory entry's name as it may be shown, logged or stored as text.

    Bytes that are not UTF-8 (``caf\\xe9.md``) and control or bidirectional
    characters are written as escapes, so a name can never break a line of a
    log, a terminal, or a JSON file.
    """
    if _PLAIN.issuperset(name):
        return name
    out = []
    for ch in name:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif (
            unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")
            or ch in _BIDI_CONTROLS
            or ch == "\\"
        ):
            out.append(ch.encode("unicode_escape").decode("ascii") if ch != "\\" else "\\\\")
        else:
            out.append(ch)
    return "".join(out)


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


class NoteName(str):
    """A bare note name that passed the lexical rules: ``NoteName(text)`` checks ``text``.

    Equal to, hashed like and printed as the ``str`` it holds; made only by its
    check, so holding one is proof of it (``check_name`` never checks it again).

    Raises:
        InvalidPath: see :func:`check_name`.
    """

    __slots__ = ()

    def __new__(cls, name: object) -> NoteName:
        problem = _name_problem(name)
        if problem is not None:
            raise InvalidPath(name if isinstance(name, str) else repr(name), problem)
        assert isinstance(name, str)
        return super().__new__(cls, name)


def check_name(name: object) -> NoteName:
    """Return ``name`` if it is a bare note name (``*.md``, no path), by lexical rules alone.

    A :class:`NoteName` is returned as it is: it was checked when it was made.

    Raises:
        InvalidPath: the name is empty, has a separator, a control character,
            is hidden, is MEMORY.md, does not end in ``.md``, is too long, ...
    """
    if type(name) is NoteName:
        return name
    return NoteName(name)


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

    Beyond :func:`check_name`, an existing entry must be a regular file: a
    symlink is never a note (a repository could commit one that leads
    anywhere), nor is a FIFO, a device or a directory. Readers still open the
    file with ``O_NOFOLLOW`` and check it again (``files.read_bytes``): this
    check only gives the clear reason.

    Raises:
        InvalidPath: the name is not a note name, or the entry is a symlink
            or not a regular file.
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
        try:
            real = os.path.realpath(path)
        except FileNotFoundError:  # removed since the lstat
            if must_exist:
                raise
            return path
        except OSError:
            # Replaced since the lstat by something that is not a symlink (readlink
            # fails with EINVAL): it was a symlink when looked at, so say that.
            raise InvalidPath(
                checked, "a symlink; mdmem reads only regular files in a store"
            ) from None
        real_root = os.path.realpath(root)
        if os.path.commonpath([real, real_root]) != real_root or real == real_root:
            raise InvalidPath(checked, "a symlink that leads outside the store")
        raise InvalidPath(checked, "a symlink; mdmem reads only regular files in a store")
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


# FS_IOC_GETVERSION, _IOR('v', 1, long): an inode's generation, which ext4, btrfs and
# f2fs change whenever they reuse an inode number (NFS file handles rely on it).
_GETVERSION = 0x80087601 if sys.platform.startswith("linux") else None


def state_dir(root: str) -> str:
    """The state folder of the store at ``root`` (catalog, journals, trash, locks, logs).

    Keyed by the store's resolved path, so two spellings of one store share
    their state and lock, and by the identity of the folder that holds the
    store (its workspace; see :func:`anchor_identity`), so a new clone at an
    old clone's path starts with a state of its own: the old clone's trash,
    waiting turns and history are never applied to it (:func:`earlier_states`
    finds them, for ``mdmem doctor`` to offer). Named after the workspace so a
    person can find it: ``<state_base>/stores/<workspace name>-<path hash>.<identity hash>``.
    Nothing is created here, and nothing is remembered: each call resolves the
    path and looks at the anchor again (``store.state``, a
    :class:`~mdmem.store.state.StateDir`, keeps its answer for its store).
    """
    return locate_state(root)[0]


def locate_state(root: str) -> tuple[str, str, str, bool]:
    """:func:`state_dir`'s answer with what it rests on: ``(folder, anchor, identity, seen)``.

    ``anchor`` is the folder whose identity keys the state; ``seen`` is False when
    it does not exist yet (an answer worth asking again, not keeping).
    """
    prefix, anchor = _state_prefix(root)
    identity, seen = anchor_identity(anchor)
    return f"{prefix}.{_digest(identity, 4)}", anchor, identity, seen is not None


def _digest(text: str, size: int) -> str:
    try:  # hashlib costs milliseconds to import (OpenSSL) on the `mdmem index` path
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - interpreters without the _blake2 module
        from hashlib import blake2b
    return blake2b(text.encode("utf-8", "surrogateescape"), digest_size=size).hexdigest()


def _state_prefix(root: str) -> tuple[str, str]:
    """``<state_base>/stores/<label>-<path hash>`` of a store, and its anchor folder."""
    real = os.path.realpath(root)
    parent = os.path.dirname(real)
    in_workspace = os.path.basename(parent) == ".PseudoClaude"
    anchor = os.path.dirname(parent) if in_workspace else parent
    owner = os.path.basename(anchor if in_workspace else real)
    label = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_.") else "-" for ch in owner)
    label = label.strip("-.")[:40] or "store"
    return os.path.join(state_base(), "stores", f"{label}-{_digest(real, 8)}"), anchor


def anchor_identity(anchor: str) -> tuple[str, os.stat_result | None]:
    """Who the folder ``anchor`` is, beyond its path: device, inode and the inode's
    generation (Linux) or birth time (macOS, BSD); and its ``stat``, None when it is missing.

    ``rm -rf repo && git clone … repo`` makes a new folder that ext4 often gives
    the old inode number (46 to 49 re-creations in 49: benchmarks/bench_inode_reuse.py);
    the generation tells them apart. Where neither is known (tmpfs, which does not reuse numbers
    soon), device and inode.
    """
    try:
        st = os.stat(anchor)
    except OSError:
        return "missing", None
    extra = getattr(st, "st_birthtime", None)
    if extra is None and _GETVERSION is not None:
        extra = _generation(anchor)
    return f"{st.st_dev}:{st.st_ino}:{extra if extra is not None else ''}", st


def _generation(path: str) -> int | None:
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NONBLOCK)
    except (ImportError, OSError):
        return None
    try:
        # A C long, as the ioctl writes it (a bytearray, not array("l"): one extension
        # module less to load on the per-prompt hook's path).
        buf = bytearray(8 if sys.maxsize > 2**32 else 4)
        fcntl.ioctl(fd, _GETVERSION, buf, True)  # type: ignore[arg-type]
        return int.from_bytes(buf, sys.byteorder, signed=True)
    except OSError:
        return None  # the file system does not keep generations
    finally:
        os.close(fd)


def earlier_states(root: str) -> list[str]:
    """State folders of the store's path that are not its own: an earlier clone's (another
    identity), or one made before state was keyed by identity. Sorted; never used by mdmem."""
    prefix, _ = _state_prefix(root)
    mine = state_dir(root)
    folder, name = os.path.split(prefix)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(
        os.path.join(folder, n)
        for n in names
        if (n == name or (n.startswith(name + ".") and len(n) == len(name) + 9))
        and os.path.join(folder, n) != mine
        and os.path.isdir(os.path.join(folder, n))
    )


#: :func:`project_problem`'s answers for the home directory's own ``.PseudoClaude``: normal,
#: not a refusal worth a warning.
IS_USER_STORE = "it is the user store (the workspace is the home directory)"
IN_HOME = "the workspace is the home directory, whose .PseudoClaude holds the user store"


def project_problem(root: str, user_store: str | None = None) -> str | None:
    """Why the project store at ``root`` must not be used, or None when it may be.

    A project store is ``<workspace>/.PseudoClaude/memory``, and everything in
    it comes from the repository. It is refused (mdmem then acts as if the
    workspace had no project store) when:

    - it is the user store, or the workspace is the home directory: the
      project store would share its files, privacy and lock with the user store;
    - ``.PseudoClaude`` or ``memory`` is a symlink (a repository can commit
      one): writes would land wherever the link points;
    - someone else controls it (:func:`control_problem`): the workspace is
      ``/``, writable by every user (``/tmp``), or not the user's (nor root's);
      ``.PseudoClaude`` or ``memory`` is not the user's own, or writable by
      others. Another local user could otherwise plant a store above your
      folders, read what mdmem writes into it, and feed their notes to your agent.
    """
    real = os.path.realpath(root)
    user = os.path.realpath(user_store or user_root())
    if real == user:
        return IS_USER_STORE
    parent = os.path.dirname(root)
    if os.path.basename(parent) != ".PseudoClaude":
        return None  # not laid out in a workspace: a store the caller chose
    workspace = os.path.dirname(parent)
    real_ws = os.path.realpath(workspace)
    if real_ws == os.path.realpath(os.path.expanduser("~")):
        return IN_HOME
    for path, what in ((parent, ".PseudoClaude"), (root, ".PseudoClaude/memory")):
        if os.path.islink(path):
            return f"{what} is a symlink (to {os.readlink(path)!r}); mdmem never follows it"
    if os.path.commonpath([real, real_ws]) != real_ws or real == real_ws:
        return "it resolves outside the workspace"
    return control_problem(real_ws)


def control_problem(workspace: str) -> str | None:
    """Why someone other than the user controls ``workspace``'s store, or None.

    The workspace folder must not be ``/`` (a store there would be every
    marker-less folder's), must belong to the user or root, and must not be
    writable by every user, sticky or not (``/tmp``: anyone can create the
    store there first). ``.PseudoClaude`` and ``.PseudoClaude/memory``, where
    they exist, must belong to the user and be writable by no one else. Group
    write is allowed only for the user's private group (a group of the user's
    name with no other member, as ``umask 002`` systems make), where it gives
    no one else anything. On a system without user ids (Windows), None.
    """
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None:
        return None
    if os.path.dirname(workspace) == workspace:
        return f"the workspace is the file system's root {workspace}"
    uid = geteuid()
    for path, what, root_ok in (
        (workspace, f"the workspace {workspace}", True),
        (os.path.join(workspace, ".PseudoClaude"), ".PseudoClaude", False),
        (os.path.join(workspace, ".PseudoClaude", "memory"), ".PseudoClaude/memory", False),
    ):
        try:
            st = os.lstat(path)
        except OSError:
            return None  # not there (yet): it will be created as the user's own
        if st.st_uid != uid and not (root_ok and st.st_uid == 0):
            return f"{what} belongs to another user (uid {st.st_uid})"
        mode = stat.S_IMODE(st.st_mode)
        if mode & stat.S_IWOTH:
            return f"{what} is writable by every user (mode {mode:o})"
        if mode & stat.S_IWGRP and not _private_group(st.st_gid):
            return f"{what} is writable by its group (mode {mode:o}, gid {st.st_gid})"
    return None


def _private_group(gid: int) -> bool:
    """Whether group ``gid`` is the user's own private group (its name, no other member)."""
    try:
        import grp
        import pwd
    except ImportError:  # pragma: no cover - not a POSIX system
        return False
    try:
        name = pwd.getpwuid(os.geteuid()).pw_name
        group = grp.getgrgid(gid)
    except (KeyError, OSError):
        return False
    return gid == os.getegid() and group.gr_name == name and set(group.gr_mem) <= {name}


def user_root() -> str:
    """The user store: ``$MDMEM_USER_DIR`` if set, else ``~/.PseudoClaude/memory``."""
    env = os.environ.get("MDMEM_USER_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.expanduser("~"), ".PseudoClaude", "memory")


def project_root(workspace: str) -> str:
    """The project store of a workspace: ``<workspace>/.PseudoClaude/memory``."""
    return os.path.join(os.path.abspath(workspace), ".PseudoClaude", "memory")


def discover_workspace(
    start: str = ".", *, user_store: str | None = None, ceiling: str | None = None
) -> str:
    """The nearest ancestor of ``start`` holding ``.PseudoClaude/`` or ``.git``, else ``start``.

    A ``.PseudoClaude/`` that only holds the user store (as ``~/.PseudoClaude``
    does) does not make a workspace; otherwise every directory under the home
    directory would share the user store as its project store. The search stops
    at ``ceiling`` when given (as git's ``GIT_CEILING_DIRECTORIES``): nothing
    above it is looked at.
    """
    start = os.path.abspath(start)
    user_parent = os.path.realpath(os.path.dirname(user_store or user_root()))
    top = os.path.abspath(ceiling) if ceiling else None
    current = start
    while True:
        if top is not None and os.path.commonpath([current, top]) != top:
            return start  # above the ceiling
        marker = os.path.join(current, ".PseudoClaude")
        if os.path.isdir(marker) and os.path.realpath(marker) != user_parent:
            return current
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return start
        current = parent
