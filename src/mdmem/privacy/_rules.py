"""The privacy filter's rules: each secret's pattern, its needles and its veto.

A rule is a pattern, the kind its marker names, which group is the secret, the
literals every match holds (``needles``: a text without them is not scanned and
the pattern is not compiled) and a veto that keeps what only looks like a secret
(a placeholder, a path, a local dev default, a version) in the text. The table is
:class:`_Patterns`, built on first use; :meth:`_Patterns.candidates` finds in one
pass over the needles the rules a text could match. The number rules' checks
(issuer prefixes, Luhn, ISO 7064 MOD 11-2) are here too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable


def _split(words: str) -> tuple[str, ...]:
    return tuple(words.split())


KINDS = _split(
    "private_key anthropic_key openai_key stripe_key aws_access_key_id aws_secret_key "
    "github_token gitlab_token npm_token huggingface_token sendgrid_key slack_token "
    "slack_webhook google_api_key jwt bearer_token basic_auth url_password password secret "
    "cn_resident_id card_number phone email custom"
)
"""Every kind a marker can name, most specific first."""

_RANK = {kind: rank for rank, kind in enumerate(KINDS)}

_Finding = tuple[str, int, int]
_Accept = Callable[["re.Match[str]", str, bool], bool]
_KindOf = Callable[["re.Match[str]"], str]


# Values that name a secret rather than hold one, or are clearly not one.
_NOT_SECRET = frozenset(
    _split(
        "none null nil true false undefined empty unset required optional missing invalid "
        "expired redacted hidden str string bytes int float bool any object dict list tuple "
        "text secretstr value pass password passwd pwd secret token foo bar baz example dummy "
        "placeholder changeme await yield self this new not"
    )
)
# Words that follow a flag or a key in prose ("use the --token flag").
_STOPWORDS = frozenset(
    _split(
        "the and for with from your our their this that its here there not yes set see via "
        "using should must will would can could flag option options argument arg param "
        "parameter instead also too when then was were are is has have"
    )
)
# A value without digits that contains one of these names a secret, as in "my-api-key".
_KEY_ROOTS = ("pass", "pwd", "token", "secret", "key", "auth", "cred")

_B64 = r"A-Za-z0-9+/_\-"
_QUOTED = r"""(?:"(?P<v1>[^"\\\n]*(?:\\.[^"\\\n]*)*)"|'(?P<v2>[^'\\\n]*(?:\\.[^'\\\n]*)*)'"""
_VALUE = _QUOTED + r"""|(?P<v3>[^\s'"`,;&|(){}<>\[\]]+))"""
_PASSWORD_KEYS = ("pass(?:word|wd|phrase|(?<![a-z0-9]pass))", "pwd")
_SECRET_KEYS = ("secret(?:[_-]?key)?", "token", "api[_-]?key", "access[_-]?key", "private[_-]?key")
_SECRET_WORDS = "|".join(_SECRET_KEYS)
# After a password word in prose: an optional "for the staging db", then "is"/"was" or
# a colon, then the value (not ending in the sentence's punctuation). Bounded: linear.
_PROSE_TAIL = (
    r"(?![a-z0-9_-])(?:[ \t]+(?:for|of|on|to)(?:[ \t]+[a-z0-9_.@-]{1,40}){1,3}?)?"
    r"(?:[ \t]+(?:is|was|is[ \t]+now|will[ \t]+be)(?:[ \t]*[:：])?[ \t]+"
    r"|(?P<sep>[ \t]*[:：][ \t]*))"
    + _QUOTED
    + r"""|(?P<v3>[^\s'"`]*[^\s'"`.,;:!?)\]}>。，；！？]))"""
)
# Words that follow "password is" in prose; and the endings of such words.
_PROSE_WORDS = frozenset(
    _split(
        "wrong correct incorrect same different required needed optional stored saved kept "
        "changed reset rotated hashed salted encrypted set unset empty blank weak strong long "
        "short secure insecure valid invalid expired known unknown shared mandatory ok okay "
        "fine good bad right incorrectly still now never always only just also in on at by "
        "a an one what which who how where why lost forgotten generated random case"
    )
)
_PROSE_ENDINGS = ("ed", "ing", "ly", "ble", "ful", "less", "ive", "ent", "ant", "al", "ous")
_ASSIGN_TAIL = r"""["']?(?P<s1>[ \t]*)(?P<sep>=>|:=|=(?!=)|:(?![:=/]))(?P<s2>[ \t]*)""" + _VALUE


def _token(prefix: str, body: str, chars: str = "A-Za-z0-9_-") -> str:
    """A token that starts with ``prefix`` and is not the tail of a longer word."""
    # The look-behind comes after the literal: a pattern that starts with a
    # literal is scanned many times faster than one that starts with anything else.
    lit = re.escape(prefix)
    return rf"{lit}(?<![{chars}]{lit}){body}"


class _Rule:
    """One pattern: which part of a match is the secret, its kind, and a veto.

    ``needles`` make a rule cheap where it cannot match: groups of literals, each
    group a choice, every group needed (``(("sk-",),)``: the text holds "sk-"). A
    text without them is not scanned, and the pattern is compiled on first use
    only: compiling every rule costs ~10 ms, which a hook that redacts a prompt's
    first words would pay at each prompt. A needle must be in every text the
    pattern matches (case-insensitive rules: in the lowered text).
    """

    __slots__ = ("_pattern", "_source", "accept", "kind", "lower", "needles")

    def __init__(
        self,
        pattern: str | re.Pattern[str],
        kind: str | _KindOf,
        accept: _Accept | None = None,
        *,
        lower: bool = False,
        needles: tuple[tuple[str, ...], ...] = (),
    ) -> None:
        self._source = pattern
        self._pattern: re.Pattern[str] | None = None if isinstance(pattern, str) else pattern
        self.kind = kind
        self.accept = accept
        # Case-insensitive rules are written in lower case and run on a lowered
        # copy of the text with the same offsets: re.IGNORECASE is several times slower.
        self.lower = lower
        self.needles = needles

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern (compiled on first use)."""
        if self._pattern is None:
            self._pattern = re.compile(self._source, re.DOTALL)
        return self._pattern

    def could_match(self, subject: str) -> bool:
        """Whether ``subject`` holds every needle group (then the pattern is run)."""
        return all(any(n in subject for n in group) for group in self.needles)

    def scan(self, text: str, low: str) -> Iterable[_Finding]:
        subject = low if self.lower else text
        if not self.could_match(subject):
            return
        for m in self.pattern.finditer(subject):
            start, end, quoted = m.start(), m.end(), False
            names = m.re.groupindex
            for name in ("v1", "v2", "v3"):
                if name in names and m.start(name) != -1:
                    start, end, quoted = m.start(name), m.end(name), name != "v3"
                    break
            if start >= end:
                continue
            if self.accept is not None and not self.accept(m, text[start:end], quoted):
                continue
            yield (self.kind if isinstance(self.kind, str) else self.kind(m)), start, end


def _literal_prefix(pattern: str) -> tuple[str, ...]:
    """The literal a key word's pattern starts with (``"api[_-]?key"``: ``"api"``)."""
    end = next((i for i, ch in enumerate(pattern) if not ch.isalnum()), len(pattern))
    return (pattern[:end],)


def _one(*needles: str) -> tuple[tuple[str, ...], ...]:
    """Needles of a rule that needs one of ``needles`` (see :class:`_Rule`)."""
    return (needles,)


def _pw_or_secret(m: re.Match[str]) -> str:
    return "password" if m.group("pw") is not None else "secret"


def _lower(text: str) -> str:
    """``text.lower()`` with the same length, so offsets stay valid."""
    # U+0130 is the one character whose lower case is two code points.
    return text.replace("\u0130", "i").lower() if "\u0130" in text else text.lower()


def _plausible(value: str) -> bool:
    """Whether a captured value could be a secret rather than a reference to one."""
    low = value.lower()
    if not value.strip() or low in _NOT_SECRET or value.startswith("[REDACTED:"):
        return False
    if not low.strip("*x.•") or (low[0] == "#" and not low.strip("#0123456789abcdef")):
        return False  # a mask such as "****" or "xxxx", or a colour such as "#d8dee9"
    if value[0] in "$%{" or "${" in value or "{{" in value or "environ" in low or "env." in low:
        return False
    if not any(c.isdigit() for c in value) and any(root in low for root in _KEY_ROOTS):
        return False  # it names itself: "my-client-secret", "ANTHROPIC_API_KEY", api_key
    # A path to a key or password file is where the secret lives, not the secret.
    return not (value.startswith(("~/", "./", "../")) or (value[0] == "/" and "/" in value[1:]))


#: Passwords that only a throwaway local setup uses: a docker-compose or a CI service.
_DEV_PASSWORDS = frozenset(
    [
        "password",
        "pass",
        "passwd",
        "postgres",
        "mysql",
        "root",
        "admin",
        "dev",
        "devpass",
        "test",
        "testpass",
        "example",
        "changeme",
        "secret",
        "guest",
    ]
)


def _local_dev_default(m: re.Match[str], password: str) -> bool:
    """A URL's password that is a local dev default: the host is this machine, and the
    password is the user's name or a stock one (``postgres://shop:shop@localhost``).

    Such a URL is what a repository's docker-compose or README commits for everyone;
    it opens nothing elsewhere, and redacting it only breaks the note that explains it.
    """
    user = m.group(0)[3:].split(":", 1)[0]
    if password != user and password.lower() not in _DEV_PASSWORDS:
        return False
    after = _compiled().url_host.match(m.string, m.end())
    host = (after.group("ip6") or after.group("host")).lower() if after else ""
    return (
        host in ("localhost", "::1", "0.0.0.0", "host.docker.internal")
        or host.endswith(".localhost")
        or host.startswith("127.")
    )


def _on_command_line(m: re.Match[str], commands: tuple[str, ...]) -> bool:
    """Whether one of ``commands`` appears earlier on the same line, at most 200 chars back."""
    text, start = m.string, m.start()
    lo = max(0, start - 200)
    lo = max(lo, text.rfind("\n", lo, start) + 1)
    return any(text.rfind(command, lo, start) != -1 for command in commands)


# Characters that render as nothing: skipped when matching, so that a zero-width
# space or a soft hyphen inside a key cannot hide it. They are kept in the text
# outside what is redacted (a zero-width joiner holds emoji together).
INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
)
"""The invisible characters (a regular-expression class body) ignored when matching."""


# Numbers: a card, a phone number, a Chinese resident ID, told from a version, a date,
# a port or an order id by the issuers' prefixes, a checksum and the grouping.


def _luhn(digits: str) -> bool:
    total = 0
    for position, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if position % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)

# Issuer prefixes: Visa, Mastercard, Amex, Discover, UnionPay, JCB, Diners, Maestro, Mir.
_IIN = (
    *("4", "51", "52", "53", "54", "55", "22", "23", "24", "25", "26", "27", "34", "37"),
    *("6011", "64", "65", "62", "35", "30", "36", "38", "39", "50", "56", "57", "58", "67"),
)


def _cn_id_valid(m: re.Match[str], value: str, quoted: bool) -> bool:
    """The ISO 7064 MOD 11-2 check of a Chinese resident ID, and a plausible birth date."""
    body, check = value[:17], value[17].upper()
    total = sum((ord(c) - 48) * w for c, w in zip(body, _ID_WEIGHTS, strict=True))
    expected = "10X98765432"[total % 11]
    year, month, day = int(value[6:10]), int(value[10:12]), int(value[12:14])
    return check == expected and 1900 <= year <= 2100 and 1 <= month <= 12 and 1 <= day <= 31


def _card_valid(m: re.Match[str], value: str, quoted: bool) -> bool:
    """An issuer's prefix, 13 to 19 digits grouped as a printed card groups them, and Luhn."""
    digits = "".join(c for c in value if c.isdigit())
    if not 13 <= len(digits) <= 19 or not digits.startswith(_IIN):
        return False  # an issuer's prefix: a 13-digit timestamp starts with 1
    seps = {c for c in value if not c.isdigit()}
    if len(seps) > 1:
        return False
    # Printed cards group digits 4-4-4-4(-3) or 4-6-5: two numbers side by side do not.
    groups = [len(g) for g in value.split(seps.pop())] if seps else [len(digits)]
    grouped = len(groups) == 1 or groups in ([4, 6, 5], [4, 6, 4])
    grouped = grouped or (all(n == 4 for n in groups[:-1]) and 1 <= groups[-1] <= 4)
    return grouped and _luhn(digits)


def _phone_valid(m: re.Match[str], value: str, quoted: bool) -> bool:
    """8 to 15 digits (E.164's limit), with balanced brackets."""
    digits = sum(1 for c in value if c.isdigit())
    return 8 <= digits <= 15 and value.count("(") == value.count(")")


class _Patterns:
    """Every compiled pattern, built once on first use to keep ``import mdmem`` cheap."""

    # Each pattern is compiled when first used (see _Rule): most texts need few of them.

    @functools.cached_property
    def private_tag(self) -> re.Pattern[str]:
        # <private>, < private >, <private reason="x">, <private/>, </private>, in
        # ASCII, full-width or HTML-escaped brackets, any case.
        lt, gt = r"(?:<|\uff1c|&lt;|&#0*60;|&#x0*3c;)", r"(?:>|\uff1e|&gt;|&#0*62;|&#x0*3e;)"
        return re.compile(
            lt + r"\s*(?P<close>/)?\s*private(?![a-z0-9_-])"
            r"(?:\s[^<>\uff1c\uff1e]{0,256}?)?/?\s*" + gt,
            re.I,
        )

    @functools.cached_property
    def invisible(self) -> re.Pattern[str]:
        return re.compile(f"[{INVISIBLE}]")

    @functools.cached_property
    def marker(self) -> re.Pattern[str]:
        return re.compile(r"\[REDACTED:[a-z0-9_]{1,40}\]")

    @functools.cached_property
    def eol(self) -> re.Pattern[str]:
        return re.compile(r"[ \t]*(?:[#\"'`]|\r|\n|$)")

    @functools.cached_property
    def ident(self) -> re.Pattern[str]:
        return re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")

    @functools.cached_property
    def camel(self) -> re.Pattern[str]:
        return re.compile(r"[A-Z][a-z]+(?:[A-Z][a-z]+)+")

    @functools.cached_property
    def url_host(self) -> re.Pattern[str]:
        return re.compile(r"\[(?P<ip6>[0-9A-Fa-f:.]{1,64})\]|(?P<host>[0-9A-Za-z._-]{1,253})")

    @functools.cached_property
    def code_call(self) -> re.Pattern[str]:
        return re.compile(r"[A-Za-z_][A-Za-z0-9_.]*[\[(]")

    def __init__(self) -> None:
        # The words each secret-key rule needs (a flag's, a tag's): one of them.
        words = ("pass", "pwd", "secret", "token", "api", "access", "private")
        sk_body = (
            r"(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|(?=[A-Za-z]*[0-9])[A-Za-z0-9]{20,})"
        )
        jwt_body = r"[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+){0,2}"
        header = r"""["']?[ \t]*[:=][ \t]*["']?(?:(?P<basic>basic)|bearer|token)[ \t]+"""
        tag = r"<(?P<tag>[a-z0-9_.:-]{0,40}?(?:(?P<pw>password|passwd|passphrase)|"
        flag = r"-?[a-z0-9-]*?(?:(?P<pw>password|passwd|passphrase|(?<![a-z0-9])pass)|"
        rules = [
            _Rule(
                r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
                r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
                "private_key",
                needles=_one("-----BEGIN"),
            ),
            _Rule(
                _token("sk-ant-", r"[A-Za-z0-9_-]{20,}"), "anthropic_key", needles=_one("sk-ant-")
            ),
            _Rule(_token("sk-", sk_body), "openai_key", needles=_one("sk-")),
            _Rule(
                _token("sk_", r"(?:live|test)_[A-Za-z0-9]{16,}"), "stripe_key", needles=_one("sk_")
            ),
            _Rule(
                _token("rk_", r"(?:live|test)_[A-Za-z0-9]{16,}"), "stripe_key", needles=_one("rk_")
            ),
            _Rule(
                _token("A", r"(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9+/])", "A-Za-z0-9+/"),
                "aws_access_key_id",
                needles=_one("AKIA", "ASIA", "ABIA", "ACCA"),
            ),
            _Rule(
                r"""secret[_-]?access[_-]?key["']?[ \t]*[:=][ \t]*["']?"""
                r"(?P<v3>[a-z0-9/+]{40})(?![a-z0-9/+=])",
                "aws_secret_key",
                lower=True,
                needles=_one("secret"),
            ),
            # Said in prose ("… with secret wJalr…", "the secret key is …"): 32 or more
            # characters of a key's alphabet, a digit or a slash among them, after the word
            # and a space or a colon; no word of prose is that long.
            _Rule(
                r"(?<![a-z0-9])secret(?:[ \t_-]?(?:access[ \t_-]?)?key)?(?:[ \t]+(?:is|was))?"
                r"""(?:[ \t]*[:=][ \t]*|[ \t]+)["'`]?"""
                r"(?P<v3>(?=[a-z0-9/+]*[0-9/+])[a-z0-9/+]{32,128})(?![a-z0-9/+=])",
                "aws_secret_key",
                lower=True,
                needles=_one("secret"),
            ),
            _Rule(
                _token("g", r"(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})"),
                "github_token",
                needles=_one("gh", "github_pat_"),
            ),
            _Rule(_token("glpat-", r"[A-Za-z0-9_-]{20,}"), "gitlab_token", needles=_one("glpat-")),
            _Rule(
                _token("npm_", r"[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
                "npm_token",
                needles=_one("npm_"),
            ),
            _Rule(
                _token("hf_", r"[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
                "huggingface_token",
                needles=_one("hf_"),
            ),
            _Rule(
                _token("SG.", r"[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", "A-Za-z0-9_."),
                "sendgrid_key",
                needles=_one("SG."),
            ),
            _Rule(
                _token("x", r"(?:ox[abeprs]|app)-[A-Za-z0-9-]{10,}"),
                "slack_token",
                needles=_one("xox", "xapp-"),
            ),
            _Rule(
                r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[a-z0-9_/+-]{8,}",
                "slack_webhook",
                lower=True,
                needles=_one("hooks.slack.com"),
            ),
            # An all-letter prefix can occur inside a base64 blob, hence "+" and "/" here.
            _Rule(
                _token("AIza", rf"[0-9A-Za-z_-]{{35}}(?![{_B64}])", _B64),
                "google_api_key",
                needles=_one("AIza"),
            ),
            _Rule(_token("eyJ", jwt_body), "jwt", needles=_one("eyJ")),
            _Rule(
                _token("authorization", header + r"(?P<v3>[a-z0-9._~+/-]+=*)", "a-z0-9_"),
                lambda m: "basic_auth" if m.group("basic") else "bearer_token",
                self._accept_header,
                lower=True,
                needles=_one("authorization"),
            ),
            _Rule(
                _token("bearer", r"[ \t]+(?P<v3>[a-z0-9._~+/-]{16,}=*)", "a-z0-9_-"),
                "bearer_token",
                lambda m, v, q: any(c.isdigit() for c in v),
                lower=True,
                needles=_one("bearer"),
            ),
            _Rule(
                # Literal first, look-behind after it: scanned at "://" only, not at
                # every position of the text.
                r"""://(?<=[A-Za-z0-9+.-]://)[^\s:/@?#'"<>]*:(?P<v3>[^\s/?#'"<>]+)@""",
                "url_password",
                lambda m, v, q: _plausible(v) and not _local_dev_default(m, v),
                needles=_one("://"),
            ),
            # One pattern per key word, each starting with a literal (see _token): the
            # literal, then a separator with "=" or ":" in it.
            *(
                _Rule(
                    word + _ASSIGN_TAIL,
                    kind,
                    self._accept_assignment,
                    lower=True,
                    needles=(_literal_prefix(word), ("=", ":")),
                )
                for words, kind in ((_PASSWORD_KEYS, "password"), (_SECRET_KEYS, "secret"))
                for word in words
            ),
            _Rule(
                _token("-", flag + _SECRET_WORDS + r")(?P<sep>=|[ \t]+)" + _VALUE, "a-z0-9_-"),
                _pw_or_secret,
                self._accept_flag,
                lower=True,
                needles=(("-",), words),
            ),
            _Rule(
                tag + _SECRET_WORDS + r"))>(?P<v3>[^<\n]{1,256})</(?P=tag)>",
                _pw_or_secret,
                lambda m, v, q: _plausible(v),
                lower=True,
                needles=(("<",), words),
            ),
            # Prose: "my password is hunter2", "the password for staging was 'x y'",
            # "the db password: s3cret", "密码是hunter2", "数据库密码：abc123".
            *(
                _Rule(
                    word + _PROSE_TAIL,
                    "password",
                    self._accept_prose,
                    lower=True,
                    needles=_one(word),
                )
                for word in ("password", "passphrase", "passwd", "passcode")
            ),
            # After 密码是 Chinese prose goes on in Chinese: any ASCII word is the value.
            _Rule(
                r"(?:密码|口令)(?:是|为|:|：)[ \t]*"
                + _QUOTED
                + r"|(?P<v3>[!-~]*[A-Za-z0-9#$%&*+/=@^_~-]))",
                "password",
                lambda m, v, q: _plausible(v) and len(v) >= 3,
                needles=_one("密码", "口令"),
            ),
            _Rule(
                r"-p(?<=[ \t]-p)" + _QUOTED + r"""|(?P<v3>[^\s'"`;&|<>()]+))""",
                "password",
                lambda m, v, q: _on_command_line(m, ("mysql", "mariadb")),
                needles=(("-p",), ("mysql", "mariadb")),
            ),
            _Rule(
                _token("-", r"""(?:u[ \t]*|-user(?:[ \t]+|=))["']?[^\s:'"]+:(?P<v3>[^\s'"]+)"""),
                "password",
                lambda m, v, q: _plausible(v) and _on_command_line(m, ("curl",)),
                needles=(("-u",), (":",), ("curl",)),
            ),
            # Numbers: the shape and a checksum, so versions, dates, ports and ids pass.
            # Each starts with its first digit and looks behind after it: a pattern
            # that starts with a look-behind is tried at every position of the text.
            _Rule(
                r"[1-9](?<![0-9A-Za-z_.-][1-9])[0-9]{16}[0-9Xx](?![0-9A-Za-z_])",
                "cn_resident_id",
                _cn_id_valid,
                needles=_one(*"123456789"),
            ),
            _Rule(
                r"[2-6](?<![0-9A-Za-z_.,-][2-6])(?:[ -]?[0-9]){12,18}(?![0-9A-Za-z_]|[.,-][0-9])",
                "card_number",
                _card_valid,
                needles=_one(*"23456"),
            ),
            _Rule(
                r"\+(?<![0-9A-Za-z_+]\+)[1-9][0-9]{0,2}(?:[ .-]?\(?[0-9]{1,4}\)?){2,6}"
                r"(?![0-9]|[.-][0-9])",
                "phone",
                _phone_valid,
                needles=_one("+"),
            ),
            _Rule(
                r"1[3-9](?<![0-9A-Za-z_.+-]1[3-9])[0-9](?P<sep>[ -]?)[0-9]{4}(?P=sep)[0-9]{4}"
                r"(?![0-9A-Za-z_]|[.-][0-9])",
                "phone",
                needles=_one("1"),
            ),
            _EmailRule(),
        ]
        self.rules: tuple[_Rule, ...] = tuple(rules)
        self._keys: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        self._by_needle: dict[tuple[bool, str], tuple[int, ...]] = {}
        self._always: tuple[int, ...] = ()

    def _index(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Each rule filed under the needles of its most selective group (its longest
        needles: ``-p`` and ``mysql``, under ``mysql``), per subject (the text, or the
        lowered text); the distinct needles of each subject."""
        by: dict[tuple[bool, str], list[int]] = {}
        self._always = tuple(i for i, rule in enumerate(self.rules) if not rule.needles)
        for i, rule in enumerate(self.rules):
            if not rule.needles:
                continue  # no literal it needs: it runs on every text
            key = max(rule.needles, key=lambda group: min(map(len, group)))
            for needle in key:
                by.setdefault((rule.lower, needle), []).append(i)
        self._by_needle = {k: tuple(v) for k, v in by.items()}
        keys = (
            tuple(n for lower, n in self._by_needle if not lower),
            tuple(n for lower, n in self._by_needle if lower),
        )
        self._keys = keys
        return keys

    def candidates(self, text: str, low: str) -> list[_Rule]:
        """The rules that could match ``text`` (``low``: it lowered), in their order.

        One pass over the distinct needles (56) instead of every rule's own (41 rules,
        ~55 us a short text): most texts a write redacts (a title, a filename) hold
        none, and no rule is looked at. Each rule found still checks all of its needles.
        """
        plain, lowered = self._keys or self._index()
        by = self._by_needle
        found = set(self._always)
        for needle in plain:
            if needle in text:
                found.update(by[False, needle])
        for needle in lowered:
            if needle in low:
                found.update(by[True, needle])
        rules = self.rules
        return [rules[i] for i in sorted(found)]

    @staticmethod
    def _accept_header(m: re.Match[str], value: str, quoted: bool) -> bool:
        return value.lower() not in _STOPWORDS and (
            len(value) >= 8 or any(c.isdigit() for c in value)
        )

    def _accept_assignment(self, m: re.Match[str], value: str, quoted: bool) -> bool:
        if not _plausible(value):
            return False
        if quoted:
            return len(value) > 1
        if len(value) < 3 or value.lower() in _STOPWORDS:
            return False
        sep, text, end = m.group("sep"), m.string, m.end()
        ident = self.ident.fullmatch(value) is not None
        # An identifier followed by a call, subscript or argument list is code.
        if ident and text[end : end + 1] in ("(", ")", "[", ","):
            return False
        if sep == ":":
            # YAML values follow a space and run to the end of the line; "token: it
            # expires" is prose, "password: str" an annotation, "passwd:dir" a name.
            return (
                bool(m.group("s2"))
                and self.eol.match(text, end) is not None
                and self.camel.fullmatch(value) is None
                and not (value[:1].isupper() and value[1:].islower() and value.isalpha())
            )
        code_style = bool(m.group("s1") or m.group("s2"))
        if code_style and ident and ("." in value or not any(c.isdigit() for c in value)):
            # ``password = form.password`` and ``token = Error`` are code.
            return value[0].islower() and not any(c in value for c in "._")
        return True

    @staticmethod
    def _accept_prose(m: re.Match[str], value: str, quoted: bool) -> bool:
        """A value after "password is" / "password:" in prose, unless it is a word about it."""
        if not _plausible(value) or value.startswith("[REDACTED"):
            return False
        low = value.lower()
        if quoted:
            return len(value) > 1
        if len(value) < 3 or low in _STOPWORDS or low in _PROSE_WORDS:
            return False
        if _compiled().code_call.match(value):
            return False  # "Optional[str]", "getpass()": code, not a value
        letters = low.replace("-", "").replace("'", "")
        if letters.isalpha():
            if m.group("sep") is not None:
                return False  # "password: required", a YAML or annotation word: keep it
            # "is hashed", "is missing", "is case-sensitive": words about the password.
            return not ("-" in low or low.endswith(_PROSE_ENDINGS))
        return True

    @staticmethod
    def _accept_flag(m: re.Match[str], value: str, quoted: bool) -> bool:
        if not _plausible(value) or value[0] == "-":
            return False
        if quoted or m.group("sep") == "=":
            return True
        return len(value) >= 3 and value.lower() not in _STOPWORDS


class _EmailRule(_Rule):
    """E-mail addresses, found from their ``@`` so the scan stays linear on long words."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(
            r"@(?<=[A-Za-z0-9._%+-]@)[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}\.)+[A-Za-z]{2,24}"
            r"(?![A-Za-z0-9-])",
            "email",
            needles=_one("@"),
        )

    def scan(self, text: str, low: str) -> Iterable[_Finding]:
        if not self.could_match(text):
            return
        for m in self.pattern.finditer(text):
            at, start = m.start(), m.start()
            while start > 0 and at - start < 64 and _LOCAL.get(text[start - 1], False):
                start -= 1
            local = text[start:at]
            # "git@github.com:org/repo" is an address of a repository, not a person;
            # "user:pass@host" is a URL password, redacted by its own rule.
            if local.strip(".") and local != "git" and text[start - 1 : start] not in (":", "/"):
                yield "email", start, m.end()


_LOCAL = dict.fromkeys("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-", True)


_patterns: _Patterns | None = None


def _compiled() -> _Patterns:
    global _patterns
    if _patterns is None:
        _patterns = _Patterns()
    return _patterns
