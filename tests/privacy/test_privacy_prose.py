"""Secrets said in prose ("my password is …", "密码是…") and keys typed in full-width letters.

Generated secrets, planted in the phrasings people use, must never survive
redaction, and never reach a store's files; ordinary sentences about passwords
stay as they are.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdmem import Level, Store
from mdmem.privacy import redact

ALPHABET = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!@#$%^&*_+-="
# A secret starts with a letter or digit: "$X", "%(x)s" and "${x}" name one, not hold one.
SECRETS = st.text(ALPHABET, min_size=6, max_size=24).filter(
    lambda s: s[0].isalnum() and any(c.isdigit() for c in s) and any(c.isalpha() for c in s)
)
PHRASES = [
    "my password is {}",
    "My password is {} so log in with it.",
    "the db password: {}",
    "the password for the staging db is {}.",
    "password of root: {} (do not share)",
    "Our wifi passphrase was {}, now changed",
    "the password is: {}",
    "密码是{}",
    "数据库密码：{}，别告诉别人",
    "服务器口令为 {}。",
]
SERVICES = st.sampled_from(["db", "staging", "the prod box", "root", "jenkins"])


def full_width(text: str) -> str:
    """``text`` in full-width forms (U+FF01..U+FF5E), as an IME types it."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@given(SECRETS, st.sampled_from(PHRASES), st.booleans())
def test_a_password_said_in_prose_never_survives(secret: str, phrase: str, wide: bool) -> None:
    planted = full_width(secret) if wide else secret
    out = redact(phrase.format(planted))
    assert planted not in out and secret not in out
    assert "[REDACTED:password]" in out


KEY_BODIES = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=36, max_size=60
)
PREFIXES = st.sampled_from(["sk-ant-api03-", "sk-proj-", "ghp_", "AKIA"])


@given(KEY_BODIES, PREFIXES)
def test_a_key_in_full_width_letters_never_survives(body: str, prefix: str) -> None:
    key = prefix + (body.upper()[:16] if prefix == "AKIA" else body + "7")
    for typed in (full_width(key), full_width(prefix) + key[len(prefix) :]):
        out = redact(f"the key is {typed} for prod")
        assert typed not in out
        assert key not in out and "[REDACTED:" in out
        assert out.startswith("the key is ") and out.endswith(" for prod")


@settings(max_examples=10)
@given(SECRETS, st.sampled_from(PHRASES), SERVICES)
def test_a_password_in_prose_never_reaches_disk(
    tmp_path_factory: pytest.TempPathFactory, secret: str, phrase: str, service: str
) -> None:
    root = tmp_path_factory.mktemp("ws") / ".PseudoClaude" / "memory"
    (root.parent.parent / ".git").mkdir(parents=True)
    store = Store(root, Level.PROJECT)
    text = f"About {service}: " + phrase.format(full_width(secret))
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": phrase.format(secret)[:60],
                "content": text,
            }
        ]
    )
    held = [
        p
        for base in (root.parent.parent, Path(os.environ["HOME"]))
        for p in base.rglob("*")
        if p.is_file() and (secret.encode() in p.read_bytes()
                            or full_width(secret).encode() in p.read_bytes())
    ]  # fmt: skip
    assert held == []


KEPT = [
    "We need a password reset flow for the admin page.",
    "the password is hashed with bcrypt",
    "The password is case-sensitive.",
    "Password is too short",
    "the password was reset yesterday",
    "password is required",
    "password is stored in Vault",
    "the password is in 1Password",
    "if password is not None:",
    "password: Optional[str]",
    "passwords: see vault",
    "用户密码重置流程需要重新设计",
    "密码是必填的",
    "密码为空时提示用户",
    "版本 3.11，端口 443。",
    "ｈｅｌｌｏ　ｗｏｒｌｄ，full-width prose stays as typed",
    "The password for the admin is managed by the ops team.",
]


@pytest.mark.parametrize("text", KEPT)
def test_sentences_about_passwords_are_kept(text: str) -> None:
    assert redact(text) == text


KEY_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/+"
# A cloud secret key: 40 characters of base64's alphabet (AWS), a digit or a slash among them.
SECRET_KEYS = st.text(KEY_ALPHABET, min_size=32, max_size=64).filter(
    lambda s: any(c.isdigit() or c in "/+" for c in s)
)
KEY_PHRASES = [
    "For now use AKIAIOSFODNN7EXAMPLQ with secret {}.",
    "the secret key is {}",
    "aws secret: {} (rotate it)",
    "Secret access key {} for the bucket",
]


@given(SECRET_KEYS, st.sampled_from(KEY_PHRASES))
@settings(max_examples=150, deadline=None)
def test_a_secret_key_said_in_prose_never_survives(key: str, phrase: str) -> None:
    assert key not in redact(phrase.format(key))


@pytest.mark.parametrize(
    "text",
    [
        "Keep the secret sauce in the README: ingredients first.",
        "read it from secret/data/prod/db in vault",
        "the secret is out: we ship on Friday",
        "a secret of 40 characters is not a word anyone writes",
    ],
)
def test_sentences_about_secrets_are_kept(text: str) -> None:
    assert redact(text) == text
