"""The privacy matrix: every secret kind x every path to disk x plain, invisible, straddled.

After each cell, every byte under the test's temporary directory (the workspace,
the home with the user store, mdmem's state folder) is scanned: the secret is
found nowhere. Every secret here is fake.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import create_op
from mdmem import Level, Manager, ProviderError, Store
from mdmem.privacy import KINDS, Redactor, _filter, redact
from mdmem.store.note import Note, NoteType

KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABFAKEFAKEFAKE"
CUSTOM = "ACME-INTERNAL-7731-FAKE"

# kind -> (text holding the secret, the secret itself: what must not reach disk)
SAMPLES: dict[str, tuple[str, str]] = {
    "private_key": (
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----",
        KEY_BODY,
    ),
    "anthropic_key": (
        "key sk-ant-api03-FAKEfake0123456789FAKEfake01 ok",
        "FAKEfake0123456789FAKEfake01",
    ),
    "openai_key": (
        "key sk-proj-FAKEfake0123456789_FAKEfake-0123 ok",
        "FAKEfake0123456789_FAKEfake",
    ),
    "stripe_key": ("key sk_live_FAKEfake0123456789FAKEfake ok", "FAKEfake0123456789FAKEfake"),
    "aws_access_key_id": ("id AKIAFAKE0123456789AB ok", "AKIAFAKE0123456789AB"),
    "aws_secret_key": (
        "aws_secret_access_key = FAKEfake0123456789/+FAKEfake0123456789/+",
        "FAKEfake0123456789/+FAKEfake0123456789/+",
    ),
    "github_token": (
        "ghp_FAKEfake0123456789FAKEfake0123456789",
        "FAKEfake0123456789FAKEfake0123456789",
    ),
    "gitlab_token": ("use glpat-FAKEfake0123456789_abXY now", "FAKEfake0123456789_abXY"),
    "npm_token": (
        "npm_FAKEfake0123456789FAKEfake0123456789",
        "FAKEfake0123456789FAKEfake0123456789",
    ),
    "huggingface_token": (
        "hf_FAKEfakeFAKEfakeFAKEfakeFAKEfakeAB",
        "FAKEfakeFAKEfakeFAKEfakeFAKEfakeAB",
    ),
    "sendgrid_key": (
        "SG.FAKEfake0123456789ab.FAKEfake0123456789FAKEfake0123456789",
        "FAKEfake0123456789ab.FAKEfake0123456789FAKEfake",
    ),
    "slack_token": (
        "xoxb-000000000000-0000000000000-FAKEfakeFAKEfake",
        "0000000000000-FAKEfakeFAKEfake",
    ),
    "slack_webhook": (
        "https://hooks.slack.com/services/T00FAKE00/B00FAKE00/FAKEfakeFAKEfakeFAKEfake",
        "T00FAKE00/B00FAKE00/FAKEfakeFAKEfakeFAKEfake",
    ),
    "google_api_key": (
        "AIzaFAKEfake0123456789_FAKEfake-0123456",
        "FAKEfake0123456789_FAKEfake-0123456",
    ),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJGQUtFIn0.FAKEfakeFAKEfake0123456789",
        "eyJzdWIiOiJGQUtFIn0.FAKEfakeFAKEfake0123456789",
    ),
    "bearer_token": (
        "Authorization: Bearer FAKEtok3n0123456789abcdef",
        "FAKEtok3n0123456789abcdef",
    ),
    "basic_auth": ("Authorization: Basic RkFLRTpGQUtFZmFrZTAxMjM=", "RkFLRTpGQUtFZmFrZTAxMjM="),
    "url_password": ("postgres://app:FAKEpw0123456789x@db.internal/app", "FAKEpw0123456789x"),
    "password": ("DB_PASSWORD=FAKEhunter2FAKE99xyz", "FAKEhunter2FAKE99xyz"),
    "secret": ("api_key=FAKEsecretFAKE0123456789", "FAKEsecretFAKE0123456789"),
    "cn_resident_id": ("身份证 11010519491231002X 号", "11010519491231002X"),
    "card_number": ("card 4111 1111 1111 1111 ok", "4111 1111 1111 1111"),
    "phone": ("手机 13912345678 ok", "13912345678"),
    "email": ("mail jane.fake.doe@example.com ok", "jane.fake.doe@example.com"),
    "custom": (f"code {CUSTOM} ok", CUSTOM),
}
assert set(SAMPLES) == set(KINDS)

ZW = "\u200b"
SHY = "\u00ad"


def invisible(secret: str) -> str:
    """The secret with a zero-width space and a soft hyphen inside it."""
    return secret[:4] + ZW + secret[4:8] + SHY + secret[8:]


def variant(kind: str, how: str) -> tuple[str, list[str]]:
    """The text to feed in, and every form of the secret that must not be on disk."""
    text, secret = SAMPLES[kind]
    needles = [secret]
    if how == "invisible":
        text = text.replace(secret, invisible(secret))
        needles.append(invisible(secret))
    if len(secret) >= 18:
        needles += [secret[:10], secret[-10:]]
    return text, needles


def disk_holds(root: Path, needles: list[str]) -> list[str]:
    found = []
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            data = path.read_bytes() + os.fsencode(name)
            found += [f"{path}: {n!r}" for n in needles if n.encode() in data]
    return found


@pytest.fixture(autouse=True)
def _custom_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDMEM_REDACT_PATTERNS", r"ACME-INTERNAL-\d+-FAKE")
    monkeypatch.setattr(_filter, "_default", None)


class Failing:
    """A provider whose unreadable answer holds the secret."""

    name = "failing"

    def __init__(self, raw: str) -> None:
        self.raw = raw

    def extract(self, request: object) -> object:
        raise ProviderError(f"cannot read {self.raw}", raw=self.raw, retryable=False)


def create(title: str = "Plain", summary: str = "", content: str = "Body.") -> dict[str, object]:
    return create_op(title, content, summary=summary)


# Each path writes ``text`` (one secret) to disk the way mdmem does.
def body(ws: Path, text: str) -> None:
    Store(ws / "mem", Level.PROJECT).apply([create(content=f"Notes.\n\n{text}\n")])


def title(ws: Path, text: str) -> None:
    Store(ws / "mem", Level.PROJECT).apply([create(title=text.replace("\n", " ")[:110])])


def filename(ws: Path, text: str) -> None:
    op = {**create(), "slug": text.replace("\n", " ")[:100]}
    Store(ws / "mem", Level.PROJECT).apply([op])


def summary(ws: Path, text: str) -> None:
    # Straddling the 240-character cut of a summary.
    padded = "s" * 200 + " " + text.replace("\n", " ")
    Store(ws / "mem", Level.PROJECT).apply([create(summary=padded)])
    Store(ws / "mem2", Level.PROJECT).apply([create(content=padded)])  # the derived summary


def extra_key(ws: Path, text: str) -> None:
    note = Note(
        "project_knowledge_x.md",
        NoteType.PROJECT_KNOWLEDGE,
        "X",
        body="Body.",
        extra={"ref": text, "links": [text, {"k": text}], text: 1},
    )
    Store(ws / "mem", Level.PROJECT).save(note)


def journal(ws: Path, text: str) -> None:
    # A long message whose cut (after ~2,600 bytes) falls inside the secret.
    long = "a" * 2620 + " " + text + " " + "z" * 4000
    with Manager(ws, provider=Failing("x")) as manager:
        manager.defer([{"role": "user", "content": long}, {"role": "assistant", "content": text}])


def failed_answer(ws: Path, text: str) -> None:
    with Manager(ws, provider=Failing(text), retry_delay=0) as manager:
        manager.update_async([{"role": "user", "content": "hello"}])
        assert manager.flush(timeout=20)


def rescued(ws: Path, text: str) -> None:
    from mdmem.manager.doctor import rescue

    store = Store(ws / "mem", Level.PROJECT)
    rescue(store, "new-note.md", f"---\ntitle: [broken\n---\n{text}\n")


def log_line(ws: Path, text: str) -> None:
    from mdmem.integrations.claude_code import log_to_file
    from mdmem.store.state import ensure_state_dir

    with Manager(ws, provider=Failing("x")):
        folder = ensure_state_dir(str(ws / ".PseudoClaude" / "memory"))
        log_to_file(folder)
        logger = logging.getLogger("mdmem")
        try:
            logger.warning("a line about %s", text)
            logger.error("and %s %d", text, 3)
        finally:
            for handler in [h for h in logger.handlers if isinstance(h, logging.FileHandler)]:
                handler.close()
                logger.removeHandler(handler)


PATHS: dict[str, Callable[[Path, str], None]] = {
    f.__name__: f
    for f in (body, title, filename, summary, extra_key, journal, failed_answer, rescued, log_line)
}


# A cut happens on three paths only: a long message, a title, a summary.
CELLS = [
    (path, how)
    for path in sorted(PATHS)
    for how in ("plain", "invisible", "straddled")
    if how != "straddled" or path in ("journal", "title", "summary")
]


@pytest.mark.parametrize(("path", "how"), CELLS)
def test_no_secret_reaches_disk(
    tmp_path: Path, path: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaks = []
    for n, kind in enumerate(KINDS):
        # Everything of one kind under one folder: its stores, its state, its logs.
        ws = tmp_path / f"ws-{n}"
        (ws / ".git").mkdir(parents=True)
        monkeypatch.setenv("MDMEM_STATE_DIR", str(ws / "state"))
        monkeypatch.setenv("MDMEM_USER_DIR", str(ws / "user"))
        text, needles = variant(kind, "invisible" if how == "invisible" else "plain")
        if how == "straddled":
            text = "pad " * 3 + text
        PATHS[path](ws, text)
        leaks += [f"{kind}: {leak}" for leak in disk_holds(ws, needles)]
        # The path did write the text, redacted: the cell tests something.
        mark = f"redacted-{kind}" if path == "filename" else f"[REDACTED:{kind}]"
        assert disk_holds(ws, [mark]), (kind, path)
    home = [leak for leak in disk_holds(tmp_path, [SAMPLES[k][1] for k in KINDS])]
    assert not home, home
    assert not leaks, "\n".join(leaks)


def test_the_matrix_writes_something(workspace: Path) -> None:
    body(workspace, "just text")
    assert any((workspace / "mem").glob("project_knowledge_*.md"))


# -- properties ---------------------------------------------------------------------------


@given(st.sampled_from(sorted(SAMPLES)), st.text(max_size=40), st.text(max_size=40))
def test_redaction_is_idempotent(kind: str, before: str, after: str) -> None:
    text = before + " " + SAMPLES[kind][0] + " " + after
    once = redact(text)
    assert redact(once) == once


@given(st.text(max_size=200))
def test_redaction_is_idempotent_on_any_text(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


ORDINARY = [
    "released on 2026-11-29 at 10:12",
    "bump to 1.80 then 2.0.1",
    "the server listens on port 8080 and 127.0.0.1:5432",
    "order id 4000012345 shipped",
    "order 1234567890123 shipped",  # 13 digits, no issuer prefix
    "ts 1733011200000 ms",
    "git@github.com:org/repo.git",
    "C++17 and -O2",
    "commit 2d611e2 fixed it",
    "pip install foo==1.2.3; npm i left-pad@1.3.0",
    "UUID 123e4567-e89b-12d3-a456-426614174000",
    "+1 to that",
    "版本 3.11，端口 443",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_numbers_are_unchanged(text: str) -> None:
    assert redact(text) == text


@given(
    st.lists(
        st.one_of(
            st.dates().map(str),
            st.integers(0, 65535).map(lambda n: f"port {n}"),
            st.tuples(st.integers(0, 99), st.integers(0, 99)).map(lambda v: f"{v[0]}.{v[1]}"),
            st.integers(10**9, 10**10 - 1).map(str),  # 10-digit order ids
            st.sampled_from(["the", "build", "passes", "修复", "版本", "and", "-", ","]),
        ),
        max_size=12,
    )
)
def test_text_without_secrets_is_unchanged(words: list[str]) -> None:
    text = " ".join(words)
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a <private>x <private>y</private> z</private> b", "a  b"),
        ('a <private reason="x">hidden</private> b', "a  b"),
        ("a < private >hidden< /private > b", "a  b"),
        ("a <PRIVATE>hidden</Private> b", "a  b"),
        ("a \uff1cprivate\uff1ehidden\uff1c/private\uff1e b", "a  b"),
        ("a &lt;private&gt;hidden&lt;/private&gt; b", "a  b"),
        ("a <private/> the rest is hidden", "a "),
        ("a <private/>hidden</private> b", "a  b"),
        ("a <private>unclosed to the end", "a "),
        ("a <pri\u200bvate>hidden</private> b", "a  b"),
        ("<private_key> and <privateer> stay", "<private_key> and <privateer> stay"),
    ],
)
def test_private_variants(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_private_split_across_messages() -> None:
    out = Redactor().redact_many(["one <private>a", "b", "c</private> two", "three"])
    assert out == ["one ", "", " two", "three"]


def test_invisible_characters_outside_secrets_are_kept() -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert redact(f"{family} sk-ant-api03-FA\u200bKEfake0123456789FAKEfake01") == (
        f"{family} [REDACTED:anthropic_key]"
    )


def test_the_cli_names_what_it_redacted(workspace: Path) -> None:
    from typer.testing import CliRunner

    from mdmem.cli import app

    result = CliRunner().invoke(
        app,
        ["--workspace", str(workspace), "add", "--title", "Mail", "write to jane.fake@example.com"],
    )
    assert result.exit_code == 0, result.output
    assert "mdmem: redacted from your text: email" in result.stderr
    plain = CliRunner().invoke(
        app, ["--workspace", str(workspace), "add", "--title", "Plain", "nothing here"]
    )
    assert "redacted" not in plain.stderr


# -- redact, then cut: long texts ---------------------------------------------------------


@pytest.mark.parametrize("size", [3_000, 30_000, 300_000])
@pytest.mark.parametrize("kind", ["anthropic_key", "private_key", "card_number", "email"])
def test_a_secret_across_the_cut_of_a_long_message_is_gone(size: int, kind: str) -> None:
    from mdmem.extract.turn import TurnLimits, from_messages

    text, secret = SAMPLES[kind]
    limits = TurnLimits()
    # The head kept is about 2/3 of the byte limit: put the secret across that point,
    # and across the tail's start too.
    head = (limits.message_bytes - 48) * 2 // 3
    body = "a" * (head - len(text) // 2) + " " + text + " " + "b" * size + " " + text + " c"
    for redactor in (Redactor(), None):
        [message] = from_messages([{"role": "user", "content": body}], limits, redactor=redactor)
        pieces = [secret[:8], secret[-8:]]
        if redactor is None:
            assert any(p in message.text for p in pieces)  # the case the test guards against
        else:
            assert not any(p in message.text for p in pieces), message.text
            assert "characters cut" in message.text


def test_a_private_block_around_a_long_tool_output_is_gone() -> None:
    from mdmem.extract.turn import TurnLimits, from_messages

    output = "<private>" + "hidden " * 50_000 + "secret tail</private> visible end"
    turn = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": output}],
        }
    ]
    [message] = from_messages(turn, TurnLimits(include_tools=True), redactor=Redactor())
    assert "hidden" not in message.text and "secret tail" not in message.text
    assert "visible end" in message.text


def test_a_logged_traceback_is_redacted(tmp_path: Path) -> None:
    from mdmem.privacy import install_log_filter

    install_log_filter()
    path = tmp_path / "log.txt"
    handler = logging.FileHandler(path, encoding="utf-8")
    logger = logging.getLogger("mdmem")
    logger.addHandler(handler)
    secret = SAMPLES["github_token"][0]
    try:
        try:
            raise ValueError(f"bad token {secret}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = path.read_text()
    assert "ValueError" in text and secret not in text and "[REDACTED:github_token]" in text


def test_a_secret_in_a_requested_file_name_is_redacted(workspace: Path) -> None:
    store = Store(workspace / "mem", Level.PROJECT)
    name = "notes_ghp_FAKEfake0123456789FAKEfake0123456789.md"
    result = store.apply([{**create(), "filename": name}])
    [applied] = result.applied
    assert applied.filename == "notes_redacted-github_token.md"
    assert disk_holds(workspace, ["FAKEfake0123456789FAKEfake"]) == []
