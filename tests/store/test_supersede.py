"""Supersession and expiry: front matter, the prompt block, `mdmem list`, validation."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from builders import create_op as create
from mdmem import Level, Manager, Store
from mdmem.cli import app
from mdmem.errors import InvalidOperation
from mdmem.extract import prompt
from mdmem.recall import search
from mdmem.store.index import prompt_block
from mdmem.store.marks import dated_index, prompt_index
from mdmem.store.operations import Create, Operation, validate

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def store(workspace: Path) -> Store:
    return Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)


def test_a_chain_of_supersessions_shows_only_the_newest(store: Store, workspace: Path) -> None:
    v1 = "project_knowledge_deploy-v1.md"
    v2 = "project_knowledge_deploy-v2.md"
    v3 = "project_knowledge_deploy-v3.md"
    store.apply([create("Deploy v1", "Deploy with Heroku pipelines.", slug="deploy-v1")])
    result = store.apply(
        [create("Deploy v2", "Deploy with fly deploy.", slug="deploy-v2", supersedes=v1)]
    )
    assert [a.action for a in result.applied] == ["create"]
    store.apply(
        [
            create(
                "Deploy v3", "Deploy with the release workflow.", slug="deploy-v3", supersedes=[v2]
            )
        ]
    )
    # All three stay on disk, and in MEMORY.md; only v3 reaches the prompt block.
    assert all((store.root / n).exists() for n in (v1, v2, v3))
    assert all(n in store.load_index() for n in (v1, v2, v3))
    block = prompt_block(store, None)
    assert v3 in block and v1 not in block and v2 not in block
    assert "supersedes: project_knowledge_deploy-v2.md" in (store.root / v3).read_text()
    entries = {e.filename: e for e in store.entries()}
    assert entries[v1].superseded_by == v2 and entries[v2].superseded_by == v3
    with Manager(workspace, provider=None) as manager:
        assert v1 not in manager.index and v3 in manager.index
        hits = manager.recall("deploy")
        assert hits and all(h.filename not in (v1, v2) for h in hits)
    hits = search([store], "deploy", semantic=False)
    assert [h.filename for h in hits] == [v3]
    runner = CliRunner()
    listed = runner.invoke(app, ["--workspace", str(workspace), "list", "--json"])
    assert {r["filename"] for r in json.loads(listed.output)} == {v3}
    everything = runner.invoke(app, ["--workspace", str(workspace), "list", "--all"])
    assert v1 in everything.output and "superseded by" in everything.output


def test_an_update_may_supersede_and_a_hand_written_key_counts(store: Store) -> None:
    store.apply([create("Old port", "The API listens on 8080."), create("Port", "It is 9090.")])
    old, new = "project_knowledge_old-port.md", "project_knowledge_port.md"
    store.apply(
        [
            {
                "action": "update",
                "level": "project",
                "filename": new,
                "content": "The API listens on 9090.",
                "supersedes": [old],
            }
        ]
    )
    assert old not in prompt_index(store)
    # A person may write the key by hand; a bad name in it is ignored, not fatal.
    text = (
        (store.root / new)
        .read_text()
        .replace(f"supersedes: {old}", "supersedes:\n- ../../etc/passwd\n- MEMORY.md")
    )
    (store.root / new).write_text(text)
    assert old in prompt_index(store)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"supersedes": "project_knowledge_nope.md"}, "supersedes"),
        ({"supersedes": "../x.md"}, "supersedes"),
        ({"supersedes": ["a.md", 3]}, "supersedes"),
        ({"expires": "next tuesday"}, "expires"),
        ({"expires": 20261231}, "expires"),
    ],
)
def test_bad_supersedes_or_expires_are_rejected_and_nothing_is_written(
    store: Store, extra: dict[str, object], field: str
) -> None:
    result = store.apply([create("Thing", "A thing.", **extra)])
    assert not result.applied and field in result.rejected[0].reason
    assert not list(store.root.glob("project_knowledge_*.md"))


def test_expiry_at_the_boundary(store: Store) -> None:
    moment = datetime(2026, 12, 31, tzinfo=timezone.utc)
    store.apply(
        [
            create(
                "Staging down",
                "Staging DB is down until the migration lands.",
                expires="2026-12-31",
            )
        ]
    )
    name = "project_knowledge_staging-down.md"
    assert "expires: 2026-12-31T00:00:00+00:00" in (store.root / name).read_text()
    before = moment - timedelta(seconds=1)
    assert name in prompt_index(store, now=before.timestamp())
    assert name not in prompt_index(store, now=moment.timestamp())
    # Recall uses the clock: an expiry in the past is left out at once.
    store.apply([create("Old freeze", "Staging frozen for the audit.", expires="2020-01-01")])
    hits = [h.filename for h in search([store], "staging", semantic=False)]
    assert "project_knowledge_old-freeze.md" not in hits
    assert name in store.load_index()  # still listed on disk


@given(st.datetimes(timezones=st.just(timezone.utc)))
def test_expires_round_trips_through_validation(moment: datetime) -> None:
    op = validate(Operation.from_dict(create("T", "c", expires=moment.isoformat())), Level.PROJECT)
    assert isinstance(op, Create) and op.expires == moment


def test_invalid_supersedes_names_raise_on_validation() -> None:
    with pytest.raises(InvalidOperation):
        validate(create("T", "c", supersedes="a/b.md"), Level.PROJECT)


def test_the_extraction_prompt_shows_dates_and_teaches_supersession(store: Store) -> None:
    store.apply([create("Build", "Run make.")], now=NOW)
    index = dated_index(store)
    assert "[updated 2026-11-29] (project_knowledge_build.md)" in index
    # Given the lines to date (the prompt block's), only those are looked up.
    assert dated_index(store, prompt_index(store)) == index
    request = prompt.build([], index, "", NOW.date())
    assert "[updated 2026-11-29]" in request.memory
    assert '"supersedes"' in request.system and '"expires"' in request.system
