"""The command line: every command through CliRunner or a real process, error paths included."""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import select
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner, Result

from builders import add_note as create
from conftest import PYTHON, ROOT, python_env, state
from mdmem import Level, Store
from mdmem.cli import app
from mdmem.cli import editor as cli_editor
from mdmem.store.index import PREAMBLE


def _walk(group: object, prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, command in getattr(group, "commands", {}).items():
        out.append(prefix + name)
        out.extend(_walk(command, f"{prefix}{name} "))
    return out


COMMANDS = sorted(_walk(get_command(app)))
LEAVES = [c for c in COMMANDS if not any(o.startswith(c + " ") for o in COMMANDS)]


@pytest.fixture(autouse=True)
def _plain_output(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MDMEM_QUIET", "MDMEM_VERBOSE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def project(ws: Path) -> Store:
    return Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)


@pytest.fixture
def user() -> Store:
    return Store(os.environ["MDMEM_USER_DIR"], Level.USER)


class Runner:
    """Runs mdmem in-process with --workspace pointing at the test's workspace."""

    def __init__(self, ws: Path) -> None:
        self.ws = ws

    def __call__(self, *args: str, input: str | None = None, **env: str) -> Result:
        args = ("--workspace", str(self.ws), *args)
        return CliRunner().invoke(app, args, input=input, env=env, prog_name="mdmem")


@pytest.fixture
def mdmem(ws: Path) -> Runner:
    return Runner(ws)


def one_error_line(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mdmem: error: "), result.stderr
    return lines[0]


# -- a scripted editor ------------------------------------------------------------------

EDITOR = textwrap.dedent(
    """
    import json, os, sys
    plan_path = os.environ["EDITOR_PLAN"]
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    step = plan.pop(0)
    with open(plan_path, "w", encoding="utf-8") as f:
        json.dump(plan, f)
    path = sys.argv[-1]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(plan_path + ".seen", "a", encoding="utf-8") as f:
        f.write(json.dumps(text) + "\\n")
    text = step.get("write", text)
    for old, new in step.get("replace", []):
        text = text.replace(old, new)
    if "touch" in step:
        with open(step["touch"], "a", encoding="utf-8") as f:
            f.write("\\nchanged behind the editor's back\\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    sys.exit(step.get("exit", 0))
    """
)


class Editor:
    """$VISUAL as a Python script that follows a plan, one step per call."""

    def __init__(self, folder: Path) -> None:
        self.script = folder / "editor.py"
        self.script.write_text(EDITOR, encoding="utf-8")
        self.plan = folder / "plan.json"

    def env(self, *steps: dict[str, object]) -> dict[str, str]:
        self.plan.write_text(json.dumps(list(steps)), encoding="utf-8")
        seen = Path(f"{self.plan}.seen")
        seen.unlink(missing_ok=True)
        command = f"{shlex.quote(PYTHON)} {shlex.quote(str(self.script))}"
        return {"VISUAL": command, "EDITOR_PLAN": str(self.plan)}

    @property
    def seen(self) -> list[str]:
        """The text the editor was given, call by call."""
        seen = Path(f"{self.plan}.seen")
        lines = seen.read_text(encoding="utf-8").splitlines() if seen.exists() else []
        return [json.loads(line) for line in lines]


@pytest.fixture
def editor(tmp_path: Path) -> Editor:
    return Editor(tmp_path)


def rescued(store: Store) -> list[Path]:
    return sorted((state(store.root) / "rescued").glob("*"))


# -- help, usage errors, documentation --------------------------------------------------


@pytest.mark.parametrize("command", LEAVES)
def test_every_command_has_help_with_an_example(mdmem: Runner, command: str) -> None:
    result = mdmem(*command.split(), "--help")
    assert result.exit_code == 0
    assert "Example: " in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["bogus"],
        ["list", "--bogus"],
        ["list", "--level", "everywhere"],
        ["list", "--type", "diary"],
        ["show"],
        ["add", "a body without a title"],
        ["merge-index", "only-one"],
        ["doctor", "extra"],
    ],
)
def test_usage_errors_are_one_line_and_exit_2(mdmem: Runner, args: list[str]) -> None:
    line = one_error_line(mdmem(*args), code=2)
    assert "(see 'mdmem" in line


def test_no_command_prints_help(mdmem: Runner) -> None:
    result = CliRunner().invoke(app, [], prog_name="mdmem")
    assert result.exit_code == 2
    assert "Commands:" in result.stderr and "merge-index" in result.stderr


def test_docs_cli_md_is_generated_from_help_and_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts/gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for command in COMMANDS:
        assert f"\n## mdmem {command}\n" in current, f"{command} is missing from docs/cli.md"
    assert gen.render() == current, "docs/cli.md is out of date: run scripts/gen_cli_docs.py"


# -- init -------------------------------------------------------------------------------


def test_init_outside_git_creates_the_store_and_says_why_no_driver(
    mdmem: Runner, project: Store
) -> None:
    result = mdmem("init")
    assert result.exit_code == 0, result.output
    assert "not in a git repository" in result.stderr
    assert (project.root / "MEMORY.md").read_text() == ""
    assert ".mdmem/" in (project.root / ".gitignore").read_text().splitlines()
    attributes = (project.root / ".gitattributes").read_text().splitlines()
    assert "MEMORY.md merge=mdmem-index" in attributes
    again = mdmem("init")
    assert again.exit_code == 0 and "already set up" in again.stdout


def test_init_keeps_what_is_already_in_the_dot_files(mdmem: Runner, project: Store) -> None:
    project.root.mkdir(parents=True)
    (project.root / ".gitignore").write_text("scratch/")  # no final newline
    create(project, "Kept")
    assert mdmem("init").exit_code == 0
    assert (project.root / ".gitignore").read_text() == "scratch/\n.mdmem/\n"
    assert "kept" in (project.root / "MEMORY.md").read_text()


# -- index, list, show ------------------------------------------------------------------


def test_index_and_list(mdmem: Runner, project: Store, user: Store) -> None:
    create(project, "Build", summary="Run make.")
    create(project, "API", type="reference_material")
    create(user, "Language")
    index = mdmem("index")
    assert index.exit_code == 0
    assert index.stdout.startswith(f"{PREAMBLE}\n\n## Project Memory\n")
    assert "## User Memory" in index.stdout
    assert json.loads(mdmem("index", "--level", "user", "--json").stdout)["block"].startswith(
        f"{PREAMBLE}\n\n## User Memory"
    )
    table = mdmem("list").stdout.splitlines()
    assert [row.split()[0] for row in table] == ["project", "project", "user"]
    only = json.loads(mdmem("list", "--type", "reference_material", "--json").stdout)
    assert [row["filename"] for row in only] == ["reference_material_api.md"]
    assert mdmem("list", "--level", "user", "--type", "project_knowledge").stdout == ""


def test_show_finds_project_then_user_and_level_picks(
    mdmem: Runner, project: Store, user: Store
) -> None:
    name = create(project, "Same", body="project body", type="user_preference")
    assert create(user, "Same", body="user body") == name
    assert "project body" in mdmem("show", name).stdout
    shown = mdmem("show", name, "--level", "user")
    assert shown.exit_code == 0 and "user body" in shown.stdout
    assert shown.stdout.startswith("---\ntype: user_preference\ntitle: Same\n")
    data = json.loads(mdmem("show", name, "--json").stdout)
    assert data["level"] == "project" and data["body"] == "project body"
    assert data["path"] == str(project.root / name)
    only_user = create(user, "Only mine")
    assert "Only mine" in mdmem("show", only_user).stdout


def test_show_missing_note_is_one_line(mdmem: Runner, project: Store) -> None:
    line = one_error_line(mdmem("show", "project_knowledge_nope.md"))
    assert "no note 'project_knowledge_nope.md'" in line


@pytest.mark.parametrize(
    "name",
    ["../../etc/passwd", "/etc/passwd.md", "MEMORY.md", ".hidden.md", "a\nb.md", "notes.txt"],
)
@pytest.mark.parametrize("command", ["show", "edit", "rm", "restore"])
def test_hostile_names_are_refused_in_one_line(mdmem: Runner, command: str, name: str) -> None:
    assert "invalid note name" in one_error_line(mdmem(command, name))


def test_malformed_note_is_an_error_for_show(mdmem: Runner, project: Store) -> None:
    project.root.mkdir(parents=True)
    (project.root / "project_knowledge_bad.md").write_text("---\ntitle: [oops\n---\nbody\n")
    assert "bad YAML" in one_error_line(mdmem("show", "project_knowledge_bad.md"))


def test_verbose_shows_the_traceback(mdmem: Runner) -> None:
    result = mdmem("-v", "show", "project_knowledge_nope.md")
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "NoteNotFound" in result.stderr


def test_read_commands_never_import_anthropic(ws: Path, project: Store) -> None:
    name = create(project, "Build")
    child = textwrap.dedent(
        """
        import sys
        from mdmem.__main__ import main
        status = main(sys.argv[1:])
        sys.stderr.write("ANTHROPIC-LOADED\\n" if "anthropic" in sys.modules else "clean\\n")
        sys.exit(status)
        """
    )
    for args in (["index"], ["index", "--json"], ["list"], ["list", "--json"], ["show", name]):
        proc = subprocess.run(
            [PYTHON, "-c", child, "--workspace", str(ws), *args],
            capture_output=True,
            text=True,
            env=python_env(),
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines()[-1] == "clean", args


def test_a_real_process_reports_errors_in_one_line(ws: Path) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "mdmem", "--workspace", str(ws), "show", "../x.md"],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=60,
    )
    assert proc.returncode == 1
    assert (
        proc.stderr.startswith("mdmem: error: invalid note name") and proc.stderr.count("\n") == 1
    )


def test_note_names_complete_in_the_shell(ws: Path, project: Store) -> None:
    name = create(project, "Build")
    env = python_env(
        _MDMEM_COMPLETE="complete_bash",
        COMP_WORDS=f"mdmem --workspace {ws} show proj",
        COMP_CWORD="4",
    )
    proc = subprocess.run(
        [PYTHON, "-m", "mdmem"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.stdout.split() == [name]


def test_reading_an_empty_workspace_creates_nothing(mdmem: Runner, ws: Path) -> None:
    for args in (["list"], ["index"], ["show", "x.md"], ["restore"], ["doctor"], ["reindex"]):
        mdmem(*args)
    assert list(ws.iterdir()) == []
    assert not Path(os.environ["MDMEM_USER_DIR"]).exists()


# -- add --------------------------------------------------------------------------------


def test_add_from_an_argument_and_from_stdin(mdmem: Runner, project: Store, user: Store) -> None:
    added = mdmem("add", "--title", "Build", "--summary", "Use make.", "Run make test.")
    assert added.exit_code == 0, added.output
    assert added.stdout == "project_knowledge_build.md\n"
    assert "Build — Use make. (project_knowledge_build.md)" in project.load_index()
    piped = mdmem("add", "--level", "user", "--title", "Tone", "-", input="Be brief.\nNo fluff.\n")
    assert piped.stdout == "user_preference_tone.md\n"
    assert user.read("user_preference_tone.md").body == "Be brief.\nNo fluff."
    typed = mdmem("add", "--type", "correction_feedback", "--title", "Cents", "Money is cents.")
    assert typed.stdout == "correction_feedback_cents.md\n"


def test_add_rejected_by_the_store_is_one_line(mdmem: Runner) -> None:
    assert "content" in one_error_line(mdmem("add", "--title", "Empty", "   "))


def test_add_in_the_editor(mdmem: Runner, editor: Editor, project: Store) -> None:
    env = editor.env(
        {"replace": [["title: \n", "title: Deploys\n"], ["---\n\n", "---\nShip on Fridays.\n"]]}
    )
    result = mdmem("add", **env)
    assert result.exit_code == 0, result.output
    assert result.stdout == "project_knowledge_deploys.md\n"
    assert project.read("project_knowledge_deploys.md").body == "Ship on Fridays."
    assert "type: project_knowledge" in editor.seen[0]


def test_add_in_the_editor_left_as_is_adds_nothing(
    mdmem: Runner, editor: Editor, project: Store
) -> None:
    result = mdmem("add", "--title", "Draft", **editor.env({}))
    assert result.exit_code == 1 and "nothing added" in result.stderr
    assert 'title: "Draft"' in editor.seen[0]
    assert not project.root.exists() or project.entries() == []


def test_add_in_the_editor_with_no_title_keeps_the_text(
    mdmem: Runner, editor: Editor, project: Store
) -> None:
    result = mdmem("add", **editor.env({"replace": [["---\n\n", "---\nWorth keeping.\n"]]}))
    assert result.exit_code == 1
    assert "missing field 'title'" in result.stderr
    [kept] = rescued(project)
    assert "Worth keeping." in kept.read_text()


# -- edit -------------------------------------------------------------------------------


def test_edit_updates_the_note_and_the_index(mdmem: Runner, editor: Editor, project: Store) -> None:
    name = create(project, "Build", summary="Old summary.")
    env = editor.env({"replace": [["Old summary.", "New summary."], ["Some body.", "New body."]]})
    result = mdmem("edit", name, **env)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{name}: saved\n"
    note = project.read(name)
    assert (note.summary, note.body) == ("New summary.", "New body.")
    assert note.updated is not None and note.created is not None
    assert "New summary." in (project.root / "MEMORY.md").read_text()


def test_edit_without_changes(mdmem: Runner, editor: Editor, project: Store) -> None:
    name = create(project, "Build")
    before = (project.root / name).read_text()
    result = mdmem("edit", name, **editor.env({}))
    assert result.exit_code == 0 and result.stdout == f"{name}: no changes\n"
    assert (project.root / name).read_text() == before


BROKEN = {"replace": [["title: Build", "title: [Build"]]}


def test_edit_broken_without_a_terminal_keeps_the_text_and_fails(
    mdmem: Runner, editor: Editor, project: Store
) -> None:
    name = create(project, "Build")
    before = (project.root / name).read_text()
    result = mdmem(
        "edit",
        name,
        **editor.env({"replace": [*BROKEN["replace"], ["Some body.", "Typed with care."]]}),
    )
    assert result.exit_code == 1
    assert "bad YAML in the front matter" in result.stderr
    [kept] = rescued(project)
    assert "Typed with care." in kept.read_text() and str(kept) in result.stderr
    assert (project.root / name).read_text() == before
    assert "Build" in project.load_index()


def test_edit_broken_then_edit_again_then_fixed(
    mdmem: Runner, editor: Editor, project: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_editor, "interactive", lambda: True)
    name = create(project, "Build")
    fix = {"replace": [["title: [Build", "title: Build, fixed"]]}
    result = mdmem("edit", name, input="e\n", **editor.env(BROKEN, fix))
    assert result.exit_code == 0, result.output
    assert "[e]dit again" in result.stderr
    # The second call of the editor got the broken text back, not the original.
    assert "title: [Build" in editor.seen[1]
    assert project.read(name).title == "Build, fixed"
    assert "Build, fixed" in (project.root / "MEMORY.md").read_text()
    assert rescued(project) == []


@pytest.mark.parametrize(("answer", "kept"), [("k\n", 1), ("a\n", 0), ("what\na\n", 0)])
def test_edit_broken_keep_aside_or_abort(
    mdmem: Runner,
    editor: Editor,
    project: Store,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    kept: int,
) -> None:
    monkeypatch.setattr(cli_editor, "interactive", lambda: True)
    name = create(project, "Build")
    before = (project.root / name).read_text()
    result = mdmem("edit", name, input=answer, **editor.env(BROKEN))
    assert result.exit_code == 1 and "nothing was saved" in result.stderr
    assert len(rescued(project)) == kept
    assert (project.root / name).read_text() == before


def test_edit_in_a_real_terminal(ws: Path, editor: Editor, project: Store) -> None:
    name = create(project, "Build")
    fix = {"replace": [["title: [Build", "title: Fixed"]]}
    master, slave = pty.openpty()
    env = python_env(**editor.env(BROKEN, fix))
    try:
        os.write(master, b"e\n")
        proc = subprocess.run(
            [PYTHON, "-m", "mdmem", "--workspace", str(ws), "edit", name],
            stdin=slave,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 0, proc.stderr
    assert project.read(name).title == "Fixed"


def test_edit_keeps_keys_a_person_adds(mdmem: Runner, editor: Editor, project: Store) -> None:
    name = create(project, "Build")
    env = editor.env({"replace": [["title: Build\n", "title: Build\ntags: [ci, make]\n"]]})
    assert mdmem("edit", name, **env).exit_code == 0
    assert project.read(name).extra == {"tags": ["ci", "make"]}


def test_edit_repairs_a_malformed_note(mdmem: Runner, editor: Editor, project: Store) -> None:
    project.root.mkdir(parents=True)
    name = "project_knowledge_hand.md"
    (project.root / name).write_text("---\ntype: project_knowledge\ntitle: [Hand\n---\nMine.\n")
    assert project.entries() == []
    result = mdmem("edit", name, **editor.env({"replace": [["[Hand", "Hand"]]}))
    assert result.exit_code == 0, result.output
    assert [e.filename for e in project.entries()] == [name]
    assert "Hand" in (project.root / "MEMORY.md").read_text()


def test_edit_of_a_note_changed_meanwhile_keeps_the_text(
    mdmem: Runner, editor: Editor, project: Store
) -> None:
    name = create(project, "Build")
    env = editor.env({"replace": [["Some body.", "Mine."]], "touch": str(project.root / name)})
    result = mdmem("edit", name, **env)
    assert "changed on disk since it was read; nothing was written" in result.stderr
    assert result.exit_code == 1
    [kept] = rescued(project)
    assert "Mine." in kept.read_text()
    assert "changed behind the editor's back" in (project.root / name).read_text()


def test_edit_with_an_empty_body_is_refused(mdmem: Runner, editor: Editor, project: Store) -> None:
    name = create(project, "Build")
    result = mdmem("edit", name, **editor.env({"replace": [["Some body.", ""]]}))
    assert result.exit_code == 1 and "the body is empty" in result.stderr
    assert project.read(name).body == "Some body."


def test_edit_when_the_editor_fails(mdmem: Runner, editor: Editor, project: Store) -> None:
    name = create(project, "Build")
    result = mdmem("edit", name, **editor.env({"replace": [["Some", "Half"]], "exit": 3}))
    assert "the editor exited with status 3" in result.stderr and result.exit_code == 1
    assert len(rescued(project)) == 1
    assert project.read(name).body == "Some body."


def test_edit_with_no_editor_to_run(mdmem: Runner, project: Store, tmp_path: Path) -> None:
    name = create(project, "Build")
    line = one_error_line(mdmem("edit", name, VISUAL=str(tmp_path / "no-such-editor")))
    assert "cannot run the editor" in line and "$VISUAL" in line


def test_edit_missing_note(mdmem: Runner, editor: Editor) -> None:
    one_error_line(mdmem("edit", "project_knowledge_nope.md", **editor.env({})))
    assert editor.seen == []


# -- rm, restore ------------------------------------------------------------------------


def test_rm_and_restore(mdmem: Runner, project: Store, user: Store) -> None:
    name = create(user, "Tone")
    removed = mdmem("rm", name)
    assert removed.exit_code == 0 and "mdmem restore" in removed.stdout
    assert not user.exists(name) and user.load_index() == ""
    listed = mdmem("restore")
    assert listed.stdout.split()[0] == "user" and listed.stdout.split()[-1] == name
    restored = mdmem("restore", name)
    assert restored.exit_code == 0 and restored.stdout == f"restored {name} (user)\n"
    assert user.exists(name) and name in user.load_index()


def test_rm_and_restore_of_missing_notes(mdmem: Runner, project: Store) -> None:
    assert "no note" in one_error_line(mdmem("rm", "project_knowledge_nope.md"))
    assert "trash" in one_error_line(mdmem("restore", "project_knowledge_nope.md"))


def test_restore_refuses_to_overwrite(mdmem: Runner, project: Store) -> None:
    name = create(project, "Build")
    assert mdmem("rm", name).exit_code == 0
    create(project, "Build")
    assert "already exists" in one_error_line(mdmem("restore", name))


# -- reindex ----------------------------------------------------------------------------


def test_reindex_reports_and_fails_on_malformed_notes(mdmem: Runner, project: Store) -> None:
    create(project, "Build")
    result = mdmem("reindex", "--level", "project")
    assert result.exit_code == 0 and result.stdout == "project: 1 notes, MEMORY.md up to date\n"
    assert result.stderr == ""  # no progress bar when stderr is not a terminal
    (project.root / "project_knowledge_bad.md").write_text("no front matter\n")
    bad = mdmem("reindex")
    assert bad.exit_code == 1 and "project_knowledge_bad.md: no YAML front matter" in bad.stderr
    assert mdmem("-q", "reindex", "--level", "user").stdout == ""


def read_terminal(master: int, proc: subprocess.Popen[str]) -> str:
    """What a child wrote to a pseudo-terminal, read while it runs so it never blocks."""
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            chunks.append(os.read(master, 65536))
        elif proc.poll() is not None:
            return b"".join(chunks).decode("utf-8", "replace")


def test_reindex_shows_progress_on_a_terminal_only(ws: Path, project: Store) -> None:
    project.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Note {i}",
                "content": "x",
            }
            for i in range(250)
        ]
    )
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [PYTHON, "-m", "mdmem", "--workspace", str(ws), "reindex", "--level", "project"],
            stderr=slave,
            stdout=subprocess.PIPE,
            text=True,
            env=python_env(),
        )
        drawn = read_terminal(master, proc)
        out = proc.communicate(timeout=60)[0]
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    assert out == "project: 250 notes, MEMORY.md up to date\n"
    assert "project" in drawn and "100%" in drawn


# -- doctor, the lock, merge-index ------------------------------------------------------


def test_doctor_reports_then_fixes(mdmem: Runner, project: Store) -> None:
    create(project, "Build")
    (project.root / "MEMORY.md").write_text(
        "- [project_knowledge] Gone — x (project_knowledge_gone.md)\n"
    )
    result = mdmem("doctor", "--level", "project")
    assert result.exit_code == 1
    assert (
        "project_knowledge_gone.md: MEMORY.md lists this note, which does not exist"
        in result.stdout
    )
    assert "doctor --fix" in result.stderr
    fixed = mdmem("doctor", "--fix", "--level", "project")
    assert fixed.exit_code == 0, fixed.output
    assert "fixed: rebuilt MEMORY.md" in fixed.stdout and fixed.stdout.endswith("  ok\n")
    assert mdmem("doctor").exit_code == 0


def test_doctor_never_fixes_a_malformed_note(mdmem: Runner, project: Store) -> None:
    create(project, "Build")
    bad = project.root / "project_knowledge_bad.md"
    bad.write_text("---\ntitle: [x\n---\n")
    result = mdmem("doctor", "--fix")
    assert result.exit_code == 1 and "1 problem" in result.stderr
    assert bad.read_text() == "---\ntitle: [x\n---\n"


HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from mdmem import Store, Level
    with Store(sys.argv[1], Level.PROJECT).lock():
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.mark.timeout(60)
def test_lock_held_by_another_process(mdmem: Runner, project: Store) -> None:
    name = create(project, "Build")
    holder = subprocess.Popen(
        [PYTHON, "-c", HOLD_LOCK, str(project.root)],
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for args in (["add", "--title", "Second", "x"], ["rm", name], ["reindex"]):
            line = one_error_line(mdmem(*args, MDMEM_LOCK_TIMEOUT="0.2"))
            assert "locked by another process" in line and str(project.root) in line
        # Readers never wait; doctor says who holds the lock, and that it is not a problem.
        assert mdmem("show", name).exit_code == 0
        doctor = mdmem("doctor", "--level", "project")
        assert doctor.exit_code == 0, doctor.output
        assert f"held by pid {holder.pid}" in doctor.stdout and "never stale" in doctor.stdout
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert mdmem("rm", name, MDMEM_LOCK_TIMEOUT="5").exit_code == 0


def test_merge_index_writes_ours(mdmem: Runner, tmp_path: Path) -> None:
    a = "- [project_knowledge] A — s (project_knowledge_a.md)\n"
    b = "- [project_knowledge] B — s (project_knowledge_b.md)\n"
    paths = [tmp_path / n for n in ("base", "ours", "theirs")]
    for path, text in zip(paths, ["", a, b], strict=True):
        path.write_text(text)
    result = mdmem("merge-index", *map(str, paths))
    assert result.exit_code == 0 and result.output == ""
    assert paths[1].read_text() == a + b
