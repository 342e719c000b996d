"""Hostile files in a store: bad front matter, odd names, FIFOs, devices, swaps, bombs, races.

Every case is bounded: a hang fails the per-test timeout, and the alias bomb
runs under an address-space limit. A bad note is skipped and reported, never
fatal to the others and never rewritten.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import PYTHON, python_env, state
from mdmem import Level, Manager, Store
from mdmem.cli import app
from mdmem.errors import InvalidNote, InvalidPath, LockTimeout, NoteExists, StoreError
from mdmem.extract.providers.offline import OfflineProvider
from mdmem.manager.doctor import examine
from mdmem.store import files
from mdmem.store.note import parse, render

pytestmark = pytest.mark.timeout(60)

GOOD = "---\ntype: project_knowledge\ntitle: Good {n}\nsummary: Fine.\n---\nBody {n}.\n"
SECRET_TITLE = "Outside secret title"


def good(n: int) -> str:
    return GOOD.format(n=n)


def cli(ws: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--workspace", str(ws), *args], prog_name="mdmem")
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        os.fsdecode(p.name): p.read_bytes()
        for p in root.iterdir()
        if p.is_file() and not p.is_symlink() and p.name != "MEMORY.md"
    }


# -- the parse fuzz -------------------------------------------------------------------

NASTY_SCALARS = [
    "2026-02-30",
    "2026-01-01 25:00:00",
    "2026-01-01T00:00:00+99:00",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    "9" * 5000,
    "0x" + "f" * 5000,
    "!!bool maybe",
    "!!int zz",
    "!!float zz",
    "!!timestamp nope",
    "!!binary '!!!'",
    "!!python/object:os.system x",
    "!foo bar",
    "!!map [1]",
    "!!str [1]",
    "[1, [2, [3]]]",
    "{a: 1, b: [x]}",
    "&a [1]",
    "*a",
    "'unclosed",
    ".inf",
    "~",
    "",
    "2026-11-29",
    "plain text",
]
KEYS = ["type", "title", "summary", "created", "updated", "expires", "supersedes", "extra", "<<"]

line = st.builds(
    lambda key, value: f"{key}: {value}",
    st.sampled_from(KEYS),
    st.one_of(st.sampled_from(NASTY_SCALARS), st.text(max_size=20)),
)
front_matter = st.lists(line, min_size=0, max_size=6).map("\n".join)
name = st.one_of(
    st.sampled_from(
        [b"caf\xe9.md", b"\xff\xfe.md", b"a\nb.md", b"bad.md", b"x\x1b[31m.md", b"\xe2\x80\xae.md"]
    ),
    st.binary(min_size=1, max_size=12)
    .filter(lambda b: b"/" not in b and b"\x00" not in b and not b.startswith(b"."))
    .map(lambda b: b + b".md"),
)


# 25 examples of six commands each: ~4 s alone, 5x that on a loaded machine. A hang
# still fails, just later than the module's 20 s bound for single cases.
@pytest.mark.timeout(120)
@settings(max_examples=25)
@given(st.lists(st.tuples(name, front_matter), min_size=1, max_size=4, unique_by=lambda t: t[0]))
def test_fuzzed_notes_never_break_the_good_ones(bad: list[tuple[bytes, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        store = ws / ".PseudoClaude" / "memory"
        store.mkdir(parents=True)
        for n in range(2):
            (store / f"good-{n}.md").write_text(good(n))
        for raw, fm in bad:
            if raw in (b"good-0.md", b"good-1.md"):
                continue
            with open(os.path.join(os.fsencode(store), raw), "wb") as f:
                f.write(f"---\n{fm}\n---\nbody\n".encode("utf-8", "surrogatepass"))
        before = tree_bytes(store)

        for command in (["index"], ["list"], ["list", "--json"]):
            code, out, _ = cli(ws, *command)
            assert code == 0, (command, out)
            assert "good-0.md" in out and "good-1.md" in out
        code, out, _ = cli(ws, "add", "--level", "project", "--title", "New", "A new note.")
        assert code == 0, out
        assert (store / "project_knowledge_new.md").is_file()
        code, out, _ = cli(ws, "doctor")
        project = Store(store, Level.PROJECT)
        valid = {e.filename for e in project.entries()}
        problems = {p.filename for p in project.problems()}
        assert {"good-0.md", "good-1.md", "project_knowledge_new.md"} <= valid
        # Every file is either a valid note or reported, by the store and by doctor.
        written = {raw for raw, _ in bad if raw not in (b"good-0.md", b"good-1.md")}
        assert len(written) == len(valid) - 3 + len(problems)
        report = examine(project)
        assert {f.subject for f in report.findings if f.check == "notes"} == problems
        assert "problem" in out or not problems
        after = tree_bytes(store)
        del after["project_knowledge_new.md"]
        assert after == before  # the bad ones are untouched, byte for byte


@given(front_matter)
def test_parse_raises_only_invalid_note_and_what_it_accepts_renders(fm: str) -> None:
    try:
        note = parse(f"---\n{fm}\n---\nbody\n", "x.md")
    except InvalidNote:
        return
    render(note)  # whatever is accepted can be written back (an update must not crash)


# -- FIFOs, devices, symlinks -------------------------------------------------------------


@pytest.fixture
def store(workspace: Path) -> Store:
    root = workspace / ".PseudoClaude" / "memory"
    root.mkdir(parents=True)
    (root / "good.md").write_text(good(1))
    return Store(root, Level.PROJECT)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda p: os.mkfifo(p), id="fifo"),
        pytest.param(lambda p: p.symlink_to("/dev/zero"), id="link-to-dev-zero"),
        pytest.param(lambda p: p.symlink_to("/dev/urandom"), id="link-to-dev-urandom"),
        pytest.param(lambda p: p.mkdir(), id="directory"),
    ],
)
@pytest.mark.parametrize("where", ["note", "MEMORY.md"])
def test_special_files_are_refused_without_blocking(
    store: Store, workspace: Path, make: object, where: str
) -> None:
    target = store.root / ("trap.md" if where == "note" else "MEMORY.md")
    make(target)  # type: ignore[operator]
    index = store.load_index()
    assert "Good 1" in index
    assert [e.filename for e in store.entries()] == ["good.md"]
    if where == "note":
        assert [p.filename for p in store.problems()] == ["trap.md"]
        with pytest.raises(InvalidPath):
            store.read("trap.md")
    code, out, _ = cli(workspace, "list")
    assert code == 0 and "good.md" in out
    if where == "note":
        assert any(f.subject == "trap.md" for f in examine(store).findings)
    elif not target.is_dir():
        # MEMORY.md is derived: the refresh replaced the trap by a real index, in the store.
        assert target.is_file() and not target.is_symlink()
        assert "Good 1" in target.read_text()
    else:
        assert any(f.subject == "MEMORY.md" for f in examine(store).findings)


def test_a_device_node_is_never_read(store: Store) -> None:
    try:
        os.mknod(store.root / "dev.md", 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero's numbers
    except (PermissionError, OSError):
        pytest.skip("creating a device node needs privileges here")
    assert "Good 1" in store.load_index()
    assert [p.filename for p in store.problems()] == ["dev.md"]


def test_the_safe_reader_refuses_links_fifos_and_large_files(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 101)
    (tmp_path / "link").symlink_to(tmp_path / "big")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(files.TooLarge):
        files.read_bytes(str(tmp_path / "big"), 100)
    with pytest.raises(files.NotRegularFile):
        files.read_bytes(str(tmp_path / "link"), 1000)
    with pytest.raises(files.NotRegularFile):
        files.read_bytes(str(tmp_path / "fifo"), 1000)
    assert files.read_bytes(str(tmp_path / "big"), 101) == b"x" * 101


# -- a swap between the scan and the open --------------------------------------------------


@pytest.mark.parametrize("swap", ["symlink", "fifo"])
def test_a_note_swapped_between_scan_and_open_leaks_nothing(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text(f"---\ntype: project_knowledge\ntitle: {SECRET_TITLE}\n---\nx\n")
    (store.root / "victim.md").write_text(good(2))
    real = files.read_bytes

    def swapping(path: str, limit: int) -> bytes:
        if path.endswith("victim.md") and not os.path.islink(path):
            os.unlink(path)
            if swap == "symlink":
                os.symlink(outside, path)
            else:
                os.mkfifo(path)
        return real(path, limit)

    monkeypatch.setattr(files, "read_bytes", swapping)
    index = store.load_index()
    assert SECRET_TITLE not in index
    assert "Good 1" in index
    assert SECRET_TITLE not in (store.root / "MEMORY.md").read_text()
    monkeypatch.setattr(files, "read_bytes", real)
    with pytest.raises(InvalidPath):
        store.read("victim.md")


def test_a_racing_swapper_never_leaks_or_hangs(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text(f"---\ntype: project_knowledge\ntitle: {SECRET_TITLE}\n---\nx\n")
    path = store.root / "flip.md"
    path.write_text(good(3))
    stop = threading.Event()

    def flipper() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            tmp = store.root / f".flip.{n}"
            if n % 3 == 0:
                os.symlink(outside, tmp)
            elif n % 3 == 1:
                os.mkfifo(tmp)
            else:
                tmp.write_text(good(3 + n))
            os.replace(tmp, path)

    thread = threading.Thread(target=flipper)
    thread.start()
    try:
        for _ in range(150):
            text = store.load_index()
            assert SECRET_TITLE not in text
            for note in store.notes():
                assert note.title != SECRET_TITLE
    finally:
        stop.set()
        thread.join()


# -- the alias bomb ---------------------------------------------------------------------------

BOMB = "\n".join(
    ["---", "type: project_knowledge", "title: Bomb", 'a: &a ["lol","lol","lol","lol","lol"]']
    + [
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
        f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]"
        for i in range(12)
    ]
    + ["---", "boom", ""]
)

BOUNDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from mdmem import Level, Store
from mdmem.errors import InvalidNote
store = Store(sys.argv[1], Level.PROJECT)
print(store.load_index(), end="")
print([p.filename for p in store.problems()])
try:
    store.read("bomb.md")
except InvalidNote as exc:
    print("invalid:", exc.reason)
"""


def test_an_alias_bomb_is_refused_within_a_memory_bound(store: Store) -> None:
    (store.root / "bomb.md").write_text(BOMB)
    proc = subprocess.run(
        [PYTHON, "-c", BOUNDED, str(store.root)],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=15,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Good 1" in proc.stdout
    assert "['bomb.md']" in proc.stdout
    assert "invalid: YAML aliases" in proc.stdout


# -- creates never clobber ----------------------------------------------------------------


def _competitor(monkeypatch: pytest.MonkeyPatch, name: str, data: bytes) -> None:
    """Someone writes ``name`` just before mdmem's final step (the link that creates it)."""
    real_link = os.link

    def link(src: str, dst: str, *args: object, **kwargs: object) -> None:
        if os.path.basename(dst) == name and not os.path.lexists(dst):
            with open(dst, "wb") as f:
                f.write(data)
        real_link(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", link)


def test_a_create_never_overwrites_a_file_that_appeared_meanwhile(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = b"---\ntype: project_knowledge\ntitle: Theirs\n---\nWritten by git.\n"
    _competitor(monkeypatch, "project_knowledge_deploy.md", theirs)
    result = store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Deploy",
                "content": "Ours.",
            },
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Other",
                "content": "Unrelated.",
            },
        ]
    )
    assert (store.root / "project_knowledge_deploy.md").read_bytes() == theirs
    # Never overwritten, and ours is not lost either: it takes the next free name.
    assert [a.filename for a in result.applied] == [
        "project_knowledge_deploy-2.md",
        "project_knowledge_other.md",
    ]
    assert "appeared meanwhile" in result.applied[0].detail and not result.rejected
    assert store.read("project_knowledge_deploy-2.md").body == "Ours."
    assert "Theirs" in store.load_index()  # the index follows what is on disk
    assert "(project_knowledge_deploy-2.md)" in store.load_index()
    assert not [p for p in store.root.iterdir() if p.name.endswith(".tmp")]


def test_save_restore_and_rename_never_overwrite_a_file_that_appeared_meanwhile(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = store.read("good.md").with_changes(filename="fresh.md", title="Fresh")
    _competitor(monkeypatch, "fresh.md", b"theirs")
    with pytest.raises(NoteExists):
        store.save(note)
    assert (store.root / "fresh.md").read_bytes() == b"theirs"

    store.apply([{"action": "delete", "level": "project", "filename": "good.md"}])
    _competitor(monkeypatch, "good.md", b"recreated by hand")
    with pytest.raises(NoteExists):
        store.restore("good.md")
    assert (store.root / "good.md").read_bytes() == b"recreated by hand"
    assert [item.filename for item in store.trash()] == ["good.md"]  # still restorable

    (store.root / "moving.md").write_text(good(7))
    _competitor(monkeypatch, "moved.md", b"appeared")
    with pytest.raises(NoteExists):
        store.rename("moving.md", "moved.md")
    assert (store.root / "moved.md").read_bytes() == b"appeared"
    assert (store.root / "moving.md").read_text() == good(7)


HOLD = """
import sys, time
from mdmem import Level, Store
store = Store(sys.argv[1], Level.PROJECT)
with store.lock():
    print("held", flush=True)
    time.sleep(30)
"""


def test_deleting_the_state_folder_never_lets_a_second_writer_in(store: Store) -> None:
    holder = subprocess.Popen(
        [PYTHON, "-c", HOLD, str(store.root)],
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        shutil.rmtree(state(store.root))
        with pytest.raises(LockTimeout), store.lock(timeout=0.3):
            pass
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    with store.lock(timeout=5):  # and once the holder is gone, the lock is free again
        pass


# -- the home directory as workspace ------------------------------------------------------


def test_the_home_directory_has_no_project_store(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".git").mkdir()  # a dotfiles repository: the home is a workspace
    user = Store(os.environ["MDMEM_USER_DIR"], Level.USER)
    user.apply(
        [
            {
                "action": "create",
                "level": "user",
                "type": "user_preference",
                "title": "Language",
                "content": "Answer in English.",
            }
        ]
    )
    code, out, _ = cli(home, "index")
    assert code == 0
    assert out.count("Language") == 1 and "## Project Memory" not in out
    code, _, err = cli(home, "add", "--level", "project", "--title", "T", "text")
    assert code == 1 and "not used as a project store" in err
    provider = OfflineProvider()
    with Manager(home, user_dir=user.path, provider=provider, turn_lock_timeout=5) as manager:
        assert manager.project.unavailable is not None
        future = manager.update_async(
            [
                {
                    "role": "user",
                    "content": "Remember: this project uses tabs. Always reply in French.",
                },
                {"role": "assistant", "content": "Noted."},
            ]
        )
        result = future.result(timeout=15)  # never waits on its own lock
    assert not result.project.applied
    assert all(p.parent == user.root for p in user.root.glob("*.md"))
    with pytest.raises(StoreError):
        manager.project.apply([])


# -- doctor reports what a repository has no business committing ------------------------


def test_doctor_reports_planted_state_and_links_and_follows_none(
    store: Store, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    legacy = store.root / ".mdmem"
    (legacy / "turns").mkdir(parents=True)
    (legacy / "txn.json").write_text('{"writes": {"../../x": "pwned"}}')
    (legacy / "trash").symlink_to(outside)
    (store.root / "hooks.log").symlink_to(outside / "rc")
    (store.root / "catalog.json").write_text("{}")
    os.mkfifo(store.root / "pipe")
    before = sorted(p.name for p in outside.iterdir())
    subjects = {f.subject: f.message for f in examine(store, fix=True).findings}
    assert "mdmem's state lives outside the repository" in subjects[".mdmem"]
    assert "symlink" in subjects[".mdmem/trash"]
    assert "symlink" in subjects["hooks.log"]
    assert "mdmem state" in subjects["catalog.json"]
    assert "FIFO" in subjects["pipe"]
    assert ".mdmem/txn.json" not in subjects  # one line for the folder, not one per file
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (legacy / "txn.json").read_text() == '{"writes": {"../../x": "pwned"}}'
    code, out, _ = cli(store.root.parent.parent, "doctor")
    assert code == 1 and "repository-state" not in out  # shown by subject and message
    assert ".mdmem: the state folder of an older mdmem" in out
