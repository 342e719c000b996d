"""The privacy filter: what must never reach disk is taken out of every text first.

mdmem runs :func:`redact` on each turn before it is journaled and on each note
before it is written. Two things happen, in this order:

1. Text between ``<private>`` and ``</private>`` (any case, across lines) is
   dropped entirely. An unclosed ``<private>`` drops everything after it: when
   in doubt, keep less.
2. Secrets are replaced by ``[REDACTED:<kind>]``. :data:`KINDS` lists the kinds,
   most specific first; that order names a text that two rules both find:
   ``private_key`` (BEGIN ... PRIVATE KEY blocks, to the end of the text when
   the END line is missing), ``anthropic_key`` (sk-ant-), ``openai_key`` (sk-,
   sk-proj-), ``aws_access_key_id`` (AKIA, ASIA), ``aws_secret_key`` (the value
   of aws_secret_access_key), ``github_token`` (ghp_ gho_ ghu_ ghs_ ghr_
   github_pat_), ``slack_token`` (xoxb- xoxp- xoxa- xoxs-), ``slack_webhook``
   (hooks.slack.com), ``google_api_key`` (AIza), ``jwt``, ``bearer_token`` and
   ``basic_auth`` (Authorization headers, "bearer <long token>"),
   ``url_password`` (scheme://user:password@host), ``password`` (password=,
   passwd:, --password, mysql -p..., curl -u user:..., <password>, and in prose:
   "my password is ...", "the db password: ...", "密码是..."), ``secret``
   (secret=, token:, api_key=, --token, --api-key) and ``custom`` (an extra
   pattern).

   For key/value secrets only the value is replaced, so the note still reads as
   what it was: ``DB_PASSWORD=[REDACTED:password]``.

Extra patterns come from :class:`Redactor`'s argument, or for the module-level
:func:`redact` from the environment variable ``MDMEM_REDACT_PATTERNS``: one
regular expression per line; blank lines are ignored, and a line that is not a
valid expression is matched as literal text.

Text is matched NFKC-normalised (and without invisible characters), so a key
typed in full-width letters (``ｓｋ-ant-…``) is found like its ASCII form; the
original characters are what is replaced.

The rules are patterns, not a classifier: they aim at few false positives on
ordinary prose and code (``password reset flow``, ``the password is hashed``,
``--password-file``, a git SHA, a UUID), so a secret in no known shape, such as
a bare random string with no word for it nearby, passes through. Markers are
never matched again, which makes redaction idempotent. Every pattern is linear
in the length of its input.

The filter is in ``_filter`` (the text's visible view, ``<private>`` blocks,
:class:`Redactor`), its table of rules in ``_rules`` (each pattern with its
needles and its veto, and the number rules' checks). May import nothing of mdmem.
"""

from __future__ import annotations

from mdmem.privacy._filter import (
    ENV_VAR,
    Redactor,
    extra_patterns_from_env,
    install_log_filter,
    kinds_found,
    redact,
    redact_data,
)
from mdmem.privacy._rules import INVISIBLE, KINDS

__all__ = [
    "ENV_VAR",
    "INVISIBLE",
    "KINDS",
    "Redactor",
    "extra_patterns_from_env",
    "install_log_filter",
    "kinds_found",
    "redact",
    "redact_data",
]
