"""Staleness against the code, in a real git repository: deleted, renamed, edited files."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import git
from mdmem import Level, Store
from mdmem.cli import app
from mdmem.store import stale
from mdmem.store.marks import prompt_index
from mdmem.store.stale import check, referenced_paths

NAME = "project_knowledge_http-layout.md"
BODY = (
    "Routes live in `internal/httpapi/routes.go`; the entry point is `cmd/server/main.go`.\n"
    "Handlers follow `docs/handlers.md`. See also `Makefile` and https://example.com/`x`."
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "repo"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    for path in (
        "internal/httpapi/routes.go",
        "cmd/server/main.go",
        "docs/handlers.md",
        "Makefile",
    ):
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(f"contents of {path}\n" * 20)
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "initial")
    return ws


def test_referenced_paths() -> None:
    assert referenced_paths(BODY) == [
        "internal/httpapi/routes.go",
        "cmd/server/main.go",
        "docs/handlers.md",
    ]
    assert referenced_paths("`go test ./...` `--flag` `/etc/passwd` `a/../b.go` `x.py:12`") == [
        "x.py"
    ]
    # Symbols and import paths are not files of the workspace.
    assert referenced_paths("`Product.Price` `money.Cents` `github.com/acme/x/y` `a.b()`") == []


def test_deleted_renamed_and_edited_files_are_found(repo: Path) -> None:
    store = Store(repo / ".PseudoClaude" / "memory", Level.PROJECT)
    written = datetime.now(timezone.utc) - timedelta(days=2)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "HTTP layout",
                "content": BODY,
            }
        ],
        now=written,
    )
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Fine",
                "content": "Run `make` from the `Makefile`.",
            }
        ],
        now=written,
    )
    assert check(store, str(repo)) == []
    (repo / "internal/http").mkdir()
    git(repo, "mv", "internal/httpapi/routes.go", "internal/http/routes.go")
    git(repo, "rm", "-q", "cmd/server/main.go")
    (repo / "docs/handlers.md").write_text("rewritten\n")
    git(repo, "commit", "-q", "-am", "move things")
    [found] = check(store, str(repo))
    assert found.filename == NAME
    assert found.reasons == (
        "renamed: internal/httpapi/routes.go → internal/http/routes.go",
        "path gone: cmd/server/main.go",
        f"changed since {written.date().isoformat()}: docs/handlers.md",
    )
    # The prompt block carries a short mark, from the cache alone.
    block = prompt_index(store)
    assert "[stale: renamed: internal/httpapi/routes.go → internal/http/routes.go" in block
    assert block.rstrip().endswith(")")
    # A settled cache never runs git.
    calls: list[tuple[str, ...]] = []
    real = stale._git
    stale._git = lambda ws, *a: calls.append(a) or real(ws, *a)  # type: ignore[assignment]
    try:
        assert [s.filename for s in check(store, str(repo))] == [NAME]
        assert calls == []
    finally:
        stale._git = real  # type: ignore[assignment]
    # Moving HEAD invalidates the marks until the next check.
    (repo / "new.txt").write_text("x")
    git(repo, "add", "new.txt")
    git(repo, "commit", "-q", "-m", "more")
    assert "[stale:" not in prompt_index(store)


def test_cli_lists_and_fixes_a_rename(repo: Path) -> None:
    store = Store(repo / ".PseudoClaude" / "memory", Level.PROJECT)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "HTTP layout",
                "content": "Routes live in `internal/httpapi/routes.go`.",
            }
        ],
        now=datetime.now(timezone.utc) - timedelta(days=1),
    )
    (repo / "internal/http").mkdir()
    git(repo, "mv", "internal/httpapi/routes.go", "internal/http/routes.go")
    git(repo, "commit", "-q", "-m", "move")
    runner = CliRunner()
    args = ["--workspace", str(repo)]
    listed = runner.invoke(app, [*args, "stale", "--json"])
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.output)
    assert row["renames"] == [
        {"from": "internal/httpapi/routes.go", "to": "internal/http/routes.go"}
    ]
    doctor = runner.invoke(app, [*args, "doctor", "--level", "project"])
    assert "stale: renamed" in doctor.output
    fixed = runner.invoke(app, [*args, "stale", "--fix"])
    assert f"updated {NAME}" in fixed.output
    assert "`internal/http/routes.go`" in store.read(NAME).body
    assert json.loads(runner.invoke(app, [*args, "stale", "--json"]).output) == []
    assert store.history(NAME)[-1].source == "cli"


def test_without_git_only_missing_paths_count(tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    (ws / "src").mkdir(parents=True)
    (ws / "src/app.py").write_text("x")
    store = Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "App",
                "content": "See `src/app.py` and `src/gone.py`.",
            }
        ]
    )
    [found] = check(store, str(ws))
    assert found.reasons == ("path gone: src/gone.py",)


def test_a_symbol_the_code_lost_is_found_and_a_foreign_one_is_not(repo: Path) -> None:
    (repo / "internal/httpapi/routes.go").write_text("func parseConfig() {}\nfunc keepMe() {}\n")
    git(repo, "commit", "-q", "-am", "symbols", "--date=2026-01-01T00:00:00")
    env_then = "2026-01-01T00:00:00"
    subprocess.run(
        ["git", "commit", "-q", "--amend", "--no-edit"],
        cwd=repo,
        env={
            **os.environ,
            "GIT_COMMITTER_DATE": env_then,
            "GIT_AUTHOR_DATE": env_then,
            "GIT_COMMITTER_NAME": "T",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        },
        check=True,
    )
    store = Store(repo / ".PseudoClaude" / "memory", Level.PROJECT)
    body = "Call `parseConfig()` then `keepMe`; logging goes through `slog.NewJSONHandler`."
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Config",
                "content": body,
            }
        ],
        now=datetime.now(timezone.utc) - timedelta(days=1),
    )
    assert check(store, str(repo)) == []
    (repo / "internal/httpapi/routes.go").write_text("func loadConfig() {}\nfunc keepMe() {}\n")
    git(repo, "commit", "-q", "-am", "rename the function")
    [found] = check(store, str(repo))
    assert found.reasons == ("symbol gone: parseConfig",)
