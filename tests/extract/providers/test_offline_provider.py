"""The offline provider: explicit requests and corrections in, create operations out."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import extraction_request
from mdmem.extract.providers.base import ExtractionRequest, Message
from mdmem.extract.providers.offline import OfflineProvider

LEVELS = {"project", "user"}
TYPES = {"user_preference", "correction_feedback", "project_knowledge", "reference_material"}
KEYS = {"action", "level", "type", "title", "summary", "content"}

P, U = "project", "user"
PREF, CORR, KNOW, REF = (
    "user_preference",
    "correction_feedback",
    "project_knowledge",
    "reference_material",
)


def request(*messages: tuple[str, str]) -> ExtractionRequest:
    return extraction_request(*messages, system="", prompt="", today=date(2026, 11, 29))


def extract(*messages: tuple[str, str]) -> list[dict[str, str]]:
    ops = OfflineProvider().extract(request(*messages))
    assert all(isinstance(op, dict) for op in ops)
    return [op for op in ops if isinstance(op, dict)]


# (user message, expected (level, type), or None for no capture)
CASES: list[tuple[str, tuple[str, str] | None]] = [
    # English, captured
    ("Remember that the integration tests need Docker running.", (P, KNOW)),
    ("remember: the API docs are at https://wiki.example.com/api", (P, REF)),
    ("Please remember to answer in Chinese.", (U, PREF)),
    ("From now on, use British spelling.", (U, PREF)),
    ("Always run `ruff check` before committing.", (P, PREF)),
    ("Never push directly to the main branch.", (P, PREF)),
    ("Don't ever delete the migrations folder.", (P, PREF)),
    ("No, use pnpm instead.", (P, CORR)),
    ("No — use `uv run pytest`, not `python -m pytest`.", (P, CORR)),
    ("Actually, use the staging database for this.", (P, CORR)),
    ("ok, and please always keep answers short", (U, PREF)),
    ("Keep in mind that the design doc is in docs/design.md.", (P, REF)),
    ("Going forward, call me Sam.", (U, PREF)),
    ("Remember this:\nThe deploy key lives in 1Password under 'infra'.", (P, KNOW)),
    ("No.\nUse yarn, not npm.", (P, CORR)),
    ("That's wrong, the config lives in settings.toml.", (P, CORR)),
    # How a person writes commits is theirs, in every repository (issue 27).
    ("- always write commit messages in English", (U, PREF)),
    ("Always tell me before you push to the main branch.", (U, PREF)),
    ("Tell me before you run the database migrations.", (U, PREF)),
    ("Ask me first before deleting anything in `dist/`.", (U, PREF)),
    # Chinese, captured
    ("以后推送到 main 分支前先告诉我。", (U, PREF)),
    ("记住：本项目的测试用 `go test ./...` 运行。", (P, KNOW)),
    ("请记住我喜欢简洁的回答。", (U, PREF)),
    ("以后用中文回答。", (U, PREF)),
    ("今后提交前先跑测试。", (U, PREF)),
    ("总是用中文写注释。", (U, PREF)),
    ("永远不要修改 vendor 目录。", (P, PREF)),
    ("别再用 npm 了，这个仓库用 pnpm。", (P, PREF)),
    ("不对，应该用 pnpm。", (P, CORR)),
    ("不是 8080 端口，而是 9090。", (P, CORR)),
    ("记住：接口文档在 https://wiki.example.com/api", (P, REF)),
    # English, not captured
    ("Do you remember what we did yesterday?", None),
    ("Can you remember the flag we used", None),
    ("I don't need you to remember this.", None),
    ("If you always add comments, the code gets noisy.", None),
    ("Never mind, that's fine.", None),
    ("No, thanks.", None),
    ("No, that's fine.", None),
    ("Remember: [REDACTED:openai_key]", None),
    ("remember my token is [REDACTED:github_token]", None),
    ("Here is the output:\n```\nRemember that this is code\nalways do X\n```\nthanks", None),
    ('The README says "Always use tabs." but that is outdated.', None),
    ("Can you fix the failing test in src/app.py?", None),
    ("> always use tabs\n\nok, thanks", None),
    ("Remember when we broke prod?", None),
    ("I always forget to run the linter.", None),
    ("Please fix the bug in `remember_user()`.", None),
    ("Run the tests and tell me what fails.", None),
    ("Tell me what the build prints.", None),
    # Chinese, not captured
    ("你还记得吗？", None),
    ("你还记得上次的问题吗", None),
    ("不要担心，慢慢来。", None),
    ("如果你总是这样写，代码会很乱。", None),
    ("不用记住这个。", None),
    ("帮我看看这个函数为什么报错", None),
    ("不要记住这个密码。", None),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_capture_table(text: str, expected: tuple[str, str] | None) -> None:
    ops = extract(("user", text))
    if expected is None:
        assert ops == []
    else:
        assert [(op["level"], op["type"]) for op in ops] == [expected]
        assert ops[0]["action"] == "create"


def test_table_is_balanced() -> None:
    positive = sum(1 for _, expected in CASES if expected is not None)
    assert len(CASES) >= 30
    assert positive >= 15
    assert len(CASES) - positive >= 15


def test_operation_fields() -> None:
    (op,) = extract(("user", "Remember that the integration tests need Docker running."))
    assert op == {
        "action": "create",
        "level": "project",
        "type": "project_knowledge",
        "title": "The integration tests need Docker running",
        "summary": "The integration tests need Docker running.",
        "content": "Remember that the integration tests need Docker running.",
    }


def test_long_sentence_is_cut_for_title_and_summary() -> None:
    text = "Remember that " + " ".join(f"step{i} runs before step{i + 1}" for i in range(40))
    (op,) = extract(("user", text))
    assert len(op["title"]) <= 60
    assert len(op["summary"]) <= 160
    assert op["title"].endswith("…")
    assert op["summary"].endswith("…")
    assert op["content"] == text


def test_only_user_messages_are_read() -> None:
    ops = extract(
        ("assistant", "Remember that I always use npm. From now on I will answer in French."),
        ("user", "Thanks, looks good."),
    )
    assert ops == []


def test_several_captures_in_one_turn_in_order() -> None:
    ops = extract(
        ("user", "Remember that CI runs on Node 20. Also, always answer in English."),
        ("assistant", "Understood."),
        ("user", "记住：部署前要先跑 `make check`。"),
    )
    # "记住：部署前要先跑 ..." states how this project works: knowledge, not a preference.
    assert [(op["level"], op["type"]) for op in ops] == [(P, KNOW), (U, PREF), (P, KNOW)]


def test_identical_captures_are_kept_once() -> None:
    ops = extract(
        ("user", "Always run `ruff` before committing."),
        ("user", "always run `ruff`   before committing."),
        ("user", "Always run `ruff` before committing."),
    )
    assert len(ops) == 1


def test_correction_quotes_the_assistant_it_corrects() -> None:
    (op,) = extract(
        ("user", "Install the dependencies."),
        ("assistant", "I'll run `npm install` now.\nThen the tests."),
        ("user", "No, use pnpm instead."),
    )
    assert op["type"] == CORR
    assert op["content"] == (
        "No, use pnpm instead.\n\nIn reply to the assistant: I'll run `npm install` now."
    )


def test_remember_this_takes_the_following_lines() -> None:
    (op,) = extract(("user", "Remember this:\n- staging is eu-west-1\n- prod is us-east-1\n\nBye."))
    assert "staging is eu-west-1" in op["content"]
    assert "prod is us-east-1" in op["content"]
    assert "Bye" not in op["content"]


def test_unclosed_fence_hides_the_rest() -> None:
    assert extract(("user", "Look:\n```\nalways use tabs\nremember that x = 1\n")) == []


def test_no_messages_no_operations() -> None:
    assert extract() == []


def test_name_is_offline() -> None:
    assert OfflineProvider.name == "offline"
    assert OfflineProvider().name == "offline"


FRAGMENTS = st.sampled_from(
    [
        "remember",
        "Remember that ",
        "always ",
        "never ",
        "No, ",
        "actually, ",
        "instead",
        "from now on, ",
        "记住：",
        "以后",
        "不对，",
        "不是",
        "而是",
        "总是",
        "不要",
        "```",
        "\n",
        "\n\n",
        " ",
        ".",
        "?",
        "？",
        "`x`",
        '"',
        "「",
        "」",
        "[REDACTED:secret]",
        "\u0130",
        "🙂",
        "use pnpm",
        ", not ",
        "吗",
        "- ",
        "> ",
        "# ",
        "https://x.example/a",
        "src/app.py",
    ]
)
texts = st.one_of(st.text(), st.lists(st.one_of(FRAGMENTS, st.text(max_size=4))).map("".join))
roles = st.sampled_from(["user", "assistant", "system", "tool", ""])


@given(st.lists(st.tuples(roles, texts), max_size=5))
def test_any_turn_gives_valid_operations(messages: list[tuple[str, str]]) -> None:
    ops = OfflineProvider().extract(request(*messages))
    assert isinstance(ops, list)
    for op in ops:
        assert isinstance(op, dict)
        assert set(op) == KEYS
        assert all(isinstance(v, str) for v in op.values())
        assert op["action"] == "create"
        assert op["level"] in LEVELS
        assert op["type"] in TYPES
        assert op["title"].strip() and "\n" not in op["title"] and len(op["title"]) <= 60
        assert op["summary"].strip() and "\n" not in op["summary"] and len(op["summary"]) <= 160
        assert op["content"].strip()


@pytest.mark.parametrize(
    "text",
    [
        "remember that " + "a-" * 500_000 + ".py",
        "remember that " + "a/" * 500_000,
        "remember " + "? " * 500_000,
        "remember that " + "`a" * 500_000,
        "```a\n" * 200_000,
        "ok, " * 250_000 + "always do x",
        "- always x\n" * 90_000,
        "不是" * 500_000 + "而是",
        "remember:\n" * 100_000,
    ],
    ids=lambda text: repr(text[:12]),
)
def test_megabyte_messages_finish(text: str) -> None:
    ops = extract(("assistant", text), ("user", text))
    assert len(ops) <= 20


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Remember that CI runs on Node 20, and from now on answer in English.",
            [(P, KNOW, "CI runs on Node 20"), (U, PREF, "Answer in English")],
        ),
        (
            "Remember that the API listens on port 8080; always use `make dev` to start it.",
            [
                (P, KNOW, "The API listens on port 8080"),
                (P, PREF, "Always use `make dev` to start it"),
            ],
        ),
        (
            "记住：测试用 `pytest -x` 运行，另外以后用中文回答。",
            [(P, KNOW, "测试用 `pytest -x` 运行"), (U, PREF, "用中文回答")],
        ),
        ("以后用中文回答，不要用英文。", [(U, PREF, "用中文回答，不要用英文")]),
        (
            "Remember that the staging DB is read-only, so never run migrations there.",
            [(P, KNOW, "The staging DB is read-only, so never run migrations there")],
        ),
    ],
)
def test_several_requests_in_one_message(text: str, expected: list[tuple[str, str, str]]) -> None:
    ops = extract(("user", text))
    assert [(op["level"], op["type"], op["title"]) for op in ops] == expected
    for op in ops:
        low = op["summary"].lower()
        assert not low.startswith(("remember", "from now on", "记住", "以后", "and "))


@pytest.mark.parametrize(
    "text",
    [
        "Remember that " + "the release train 20261201 ships build 123456789 " * 3,
        "记住：部署在每周五的十点开始端口是808012345678901234567890以及数据库在本地的五四三二端口上运行和备份",
        "Remember that supercalifragilisticexpialidociousandmoreandmorewordsinonewordhere is long.",
    ],
)
def test_titles_and_file_names_are_never_cut_inside_a_word_or_number(
    text: str, tmp_path: object
) -> None:
    from mdmem.store.paths import slugify

    (op,) = extract(("user", text))
    title = op["title"]
    assert len(title) <= 60
    if title.endswith("…"):
        kept = title[:-1].rstrip().lower()
        whole = " ".join(text.split()).lower()
        position = whole.find(kept)
        assert position >= 0
        following = whole[position + len(kept) : position + len(kept) + 1]
        word = kept.split()[-1]
        # The title stops where a word or a number stops, unless one word is half the limit.
        if len(word) <= 30:
            assert not (kept[-1].isascii() and kept[-1].isalnum() and following.isalnum())
    slug = slugify(title)
    assert not slug.endswith("-") and len(slug) <= 60


# Issue 27: corrections, facts said in passing, and what must not become a note.
MORE: list[tuple[str, tuple[str, str] | None]] = [
    ("No, don't use npm here, we use pnpm.", (P, CORR)),
    ("no, PRs go against the develop branch", (P, CORR)),
    ("别用 unittest，用 pytest 写测试。", (P, CORR)),
    ("The integration tests need Redis on 6380.", (P, KNOW)),
    ("集成测试需要 Redis 跑在 6380 端口上。", (P, KNOW)),
    ("Our CI runs on Node 20.11.", (P, KNOW)),
    ("From now on write commit messages in the imperative mood.", (U, PREF)),
    ("From now on use pnpm in this repo.", (P, PREF)),
    ("The build is broken right now, can you look?", None),
    ("Rename the variable tmp to buffer in reader.py.", None),
    ("现在页面白屏了，看一下。", None),
    ("No, not now.", None),
    ("The staging database password is Tr0ub4dor&3xyz.", None),
    ("记住，测试环境的 api_key=[REDACTED:openai_key] 。", None),
]


@pytest.mark.parametrize(("text", "expected"), MORE)
def test_more_captures(text: str, expected: tuple[str, str] | None) -> None:
    ops = extract(("user", text))
    got = [(op["level"], op["type"]) for op in ops]
    assert got == ([] if expected is None else [expected])


def test_title_has_no_url() -> None:
    (op,) = extract(("user", "Remember that the API contract is at https://wiki.acme.dev/pay/v3."))
    assert "http" not in op["title"] and "wiki.acme.dev" not in op["title"]
    assert "https://wiki.acme.dev/pay/v3" in op["content"]


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=10, max_value=60))
def test_title_never_cuts_a_number(number: int, words: int) -> None:
    text = "Remember that " + "the service " * (words // 2) + f"listens on {number} for tests"
    (op,) = extract(("user", text))
    # Every word of the title is a whole word of the sentence: never cut inside one.
    assert set(op["title"].rstrip("…").lower().split()) <= set(text.lower().split())


def test_changed_fact_supersedes_the_note_it_replaces() -> None:
    req = ExtractionRequest(
        system="",
        prompt="",
        messages=(Message("user", "No, we switched to pnpm last week, use pnpm from now on."),),
        project_index="- [project_knowledge] Package manager — The web app uses npm. "
        "[updated 2026-12-01] (project_knowledge_package-manager.md)\n"
        "- [project_knowledge] Redis port — Tests use Redis on 6379. (project_knowledge_redis.md)",
        user_index="",
        today=date(2026, 12, 1),
    )
    (op,) = OfflineProvider().extract(req)
    assert isinstance(op, dict)
    assert op["supersedes"] == ["project_knowledge_package-manager.md"]


def test_new_fact_on_another_topic_supersedes_nothing() -> None:
    req = ExtractionRequest(
        system="",
        prompt="",
        messages=(Message("user", "Actually, we use structlog for logging now."),),
        project_index="- [project_knowledge] Package manager — The web app uses npm. "
        "(project_knowledge_package-manager.md)",
        user_index="",
        today=date(2026, 12, 1),
    )
    (op,) = OfflineProvider().extract(req)
    assert isinstance(op, dict)
    assert "supersedes" not in op


@pytest.mark.parametrize(
    "text",
    [
        "Remember that the staging password is [REDACTED:password], it's in the vault.",
        "数据库密码是 [REDACTED:password]，先用着。",
    ],
)
def test_a_password_redacted_before_it_arrives_is_still_no_note(text: str) -> None:
    assert extract(("user", text)) == []
