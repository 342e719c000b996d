"""The privacy filter: secrets of every kind are redacted, ordinary text is left alone.

Every secret here is fake: it has the shape of a real one and says FAKE where it can.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mdmem.privacy import KINDS, Redactor, _filter, _rules, extra_patterns_from_env, redact

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
B64URL = ALNUM + "-_"

ANT = "sk-ant-api03-FAKEfake0123456789FAKEfake0123456789FAKEfake01-AA"
ANT2 = "sk-ant-admin01-FAKE_fake_0123456789_FAKE"
OPENAI_PROJ = "sk-proj-FAKEfake0123456789_FAKEfake-0123456789FAKE"
OPENAI_LEGACY = "sk-FAKEfake0123456789FAKEfake0123456789FAKEfake0123"
AKIA = "AKIAFAKE0123456789AB"
ASIA = "ASIAFAKE9876543210ZZ"
AWS_SECRET = "FAKEfake0123456789/+FAKEfake0123456789/+"
GHP = "ghp_FAKEfake0123456789FAKEfake0123456789"
GHO = "gho_FAKEfake0123456789FAKEfake0123456789"
GH_PAT = "github_pat_11FAKEFAKE0123456789_FAKEfake0123456789FAKEfake0123456789"
XOXB = "xoxb-000000000000-0000000000000-FAKEfakeFAKEfake"
XOXP = "xoxp-1111111111-2222222222-FAKEfake"
HOOK = "https://hooks.slack.com/services/T00FAKE00/B00FAKE00/FAKEfakeFAKEfakeFAKEfake"
AIZA = "AIzaFAKEfake0123456789_FAKEfake-0123456"
assert len(AIZA) == 39
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJGQUtFIiwibmFtZSI6IkZha2UgVXNlciJ9"
    ".FAKEfakeFAKEfake0123456789_FAKEfake-01234"
)
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABFAKEFAKEFAKE"


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# (kind, text, the secret that must be gone)
POSITIVE = [
    (
        "private_key",
        "Add this deploy key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
        f"{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\nthen restart.",
        KEY_BODY,
    ),
    (
        "private_key",
        f"$ cat id_rsa\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA{KEY_BODY}\n(output cut)",
        KEY_BODY,
    ),
    (
        "private_key",
        f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{KEY_BODY}\n-----END ENCRYPTED PRIVATE KEY-----",
        KEY_BODY,
    ),
    (
        "private_key",
        '{"type": "service_account", "private_key": "-----BEGIN EC PRIVATE KEY-----\\n'
        f'{KEY_BODY}\\n-----END EC PRIVATE KEY-----\\n"}}',
        KEY_BODY,
    ),
    ("anthropic_key", f"export ANTHROPIC_API_KEY={ANT}\nmdmem extract turn.json", ANT),
    (
        "anthropic_key",
        f'curl https://api.anthropic.com/v1/messages -H "x-api-key: {ANT2}" -d @body.json',
        ANT2,
    ),
    ("openai_key", f"# .env\nOPENAI_API_KEY={OPENAI_PROJ}\nDEBUG=1\n", OPENAI_PROJ),
    ("openai_key", f'client = OpenAI(api_key="{OPENAI_LEGACY}")', OPENAI_LEGACY),
    ("aws_access_key_id", f"[default]\naws_access_key_id = {AKIA}\nregion = eu-west-1", AKIA),
    ("aws_access_key_id", f"export AWS_ACCESS_KEY_ID={ASIA} && aws s3 ls", ASIA),
    ("aws_secret_key", f"[default]\naws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET),
    (
        "aws_secret_key",
        f'{{"Credentials": {{"AccessKeyId": "x", "SecretAccessKey": "{AWS_SECRET}"}}}}',
        AWS_SECRET,
    ),
    ("github_token", f"git clone https://{GHP}@github.com/acme/app.git", GHP),
    ("github_token", f"env:\n  GITHUB_TOKEN: {GH_PAT}\n", GH_PAT),
    ("github_token", f"echo {GHO} | gh auth login --with-token", GHO),
    ("slack_token", f"SLACK_BOT_TOKEN={XOXB}\nSLACK_CHANNEL=#deploys", XOXB),
    ("slack_token", f"hey, use {XOXP} to post to #general from the script", XOXP),
    (
        "slack_webhook",
        f"curl -X POST -H 'Content-type: application/json' --data '{{\"text\":\"hi\"}}' {HOOK}",
        HOOK,
    ),
    ("slack_webhook", f"alerts:\n  webhook_url: {HOOK}\n", HOOK),
    ("google_api_key", f'const firebaseConfig = {{ apiKey: "{AIZA}", projectId: "x" }};', AIZA),
    (
        "google_api_key",
        f"GET https://maps.googleapis.com/maps/api/geocode/json?key={AIZA}&address=Paris",
        AIZA,
    ),
    ("jwt", f"curl -H 'Authorization: Bearer {JWT}' https://api.example.com/me", JWT),
    ("jwt", f"Set-Cookie: session={JWT}; Path=/; HttpOnly", JWT),
    (
        "bearer_token",
        'curl -H "Authorization: Bearer FAKEtoken0123456789abcdef" https://api.example.com',
        "FAKEtoken0123456789abcdef",
    ),
    (
        "bearer_token",
        "the request went out with bearer FAKE0123456789abcdefFAKE and got a 401",
        "FAKE0123456789abcdefFAKE",
    ),
    ("basic_auth", "Authorization: Basic RkFLRXVzZXI6RkFLRXBhc3M=", "RkFLRXVzZXI6RkFLRXBhc3M="),
    (
        "basic_auth",
        "curl -H 'authorization: basic dXNlcjpGQUtFcGFzcw==' https://ci.example.com",
        "dXNlcjpGQUtFcGFzcw==",
    ),
    (
        "url_password",
        "DATABASE_URL=postgres://app:FakePass123@db.internal:5432/app",
        "FakePass123",
    ),
    (
        "url_password",
        "git remote add origin https://deploy:FAKEpw0rd@gitlab.example.com/team/repo.git",
        "FAKEpw0rd",
    ),
    ("password", "# .env\nDB_PASSWORD=FakePassw0rd!\nDB_USER=app\n", "FakePassw0rd!"),
    ("password", "database:\n  user: app\n  password: FakeYamlPw9\n  port: 5432\n", "FakeYamlPw9"),
    ("password", '{"username": "bob", "password": "FakeJsonPw1"}', "FakeJsonPw1"),
    ("password", "[client]\nuser = root\npassword = FakeIniPw2\n", "FakeIniPw2"),
    ("password", 'export PGPASSWORD="Fake Quoted Pw"; psql -h db', "Fake Quoted Pw"),
    ("password", "mysql -u root -pFakeMysqlPw3 appdb < dump.sql", "FakeMysqlPw3"),
    ("password", "mysqldump -u root -p'Fake Mysql Pw4' appdb", "Fake Mysql Pw4"),
    ("password", "./deploy.sh --host db --password FakeFlagPw5 --yes", "FakeFlagPw5"),
    ("password", "./deploy.sh --password=FakeFlagPw6", "FakeFlagPw6"),
    ("password", "curl -u admin:FakeCurlPw7 https://jenkins.example.com/api/json", "FakeCurlPw7"),
    ("password", "<server><id>nexus</id><password>FakeXmlPw8</password></server>", "FakeXmlPw8"),
    ("password", "sshpass passphrase: FakePhrase9", "FakePhrase9"),
    ("secret", "llm:\n  api_key: FakeApiKey0123456789\n", "FakeApiKey0123456789"),
    ("secret", "export SENTRY_AUTH_TOKEN=FakeSentryToken0123", "FakeSentryToken0123"),
    ("secret", "vault login --token FakeVaultToken0123", "FakeVaultToken0123"),
    ("secret", "tool sync --api-key=FakeCliKey0123 --verbose", "FakeCliKey0123"),
    ("secret", "SECRET_KEY = 'django-insecure-FAKEfake0123'", "django-insecure-FAKEfake0123"),
    (
        "secret",
        "GET https://api.example.com/v1/items?access_token=FakeQueryTok0123&page=2",
        "FakeQueryTok0123",
    ),
    # Kinds added for issue 9.
    ("stripe_key", "STRIPE=sk_live_FAKEfake0123456789FAKEfake", "sk_live_FAKEfake0123456789"),
    ("stripe_key", "restricted key rk_test_51FAKEfake0123456789zz in CI", "rk_test_51FAKE"),
    ("gitlab_token", "git clone https://oauth:x@gl/ or glpat-FAKEfake0123456789_ab", "glpat-FAKE"),
    ("gitlab_token", "token glpat-ABCDEFGHIJKLMNOPQRST for the runner", "glpat-ABCDEF"),
    (
        "npm_token",
        "//registry.npmjs.org/:_authToken npm_FAKEfake0123456789FAKEfake0123456789",
        "npm_FAKE",
    ),
    ("npm_token", "NPM npm_0123456789abcdefghijABCDEFGHIJ012345 end", "npm_0123456789abc"),
    ("huggingface_token", "HF hf_FAKEfakeFAKEfakeFAKEfakeFAKEfakeAB", "hf_FAKEfake"),
    ("huggingface_token", "login with hf_abcdefghijklmnopqrstuvwxyzABCDEFGH now", "hf_abcdefgh"),
    (
        "sendgrid_key",
        "SG.FAKEfake0123456789ab.FAKEfake0123456789FAKEfake0123456789FAKEfak",
        "SG.FAKE",
    ),
    ("sendgrid_key", "mail key SG.abcdefghijklmnopqrstuv.0123456789abcdef0123", "SG.abcdefghij"),
    ("card_number", "charge 4111 1111 1111 1111 twice", "4111 1111 1111 1111"),
    ("card_number", "card 5555-5555-5555-4444 exp 12/30", "5555-5555-5555-4444"),
    ("card_number", "amex 378282246310005.", "378282246310005"),
    ("cn_resident_id", "身份证号 11010519491231002X 请保密", "11010519491231002X"),
    ("cn_resident_id", "id=44030419900307123x", "44030419900307123"),
    ("phone", "call me at +1 415 555 0132 tonight", "415 555 0132"),
    ("phone", "手机 13800138000，微信同号", "13800138000"),
    ("phone", "tel +86 138-0013-8000", "0013-8000"),
    ("email", "write to jane.doe@example.com for access", "jane.doe@example.com"),
    ("email", "cc ops+alerts@corp.example.org please", "ops+alerts@corp"),
]

# Ordinary developer prose and code: none of it is a secret.
NEGATIVE = [
    "We need a password reset flow for the admin page.",
    "Implement a token bucket rate limiter in ratelimit.py",
    "pg_dump --password-file ~/.pgpass mydb",
    "def get_token(self) -> str:\n    return self._token",
    "git checkout 3f2c1a9b8e7d6c5b4a3928170f6e5d4c3b2a1908",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    'img = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf'
    'DwAChwGA60e6kgAAAABJRU5ErkJggg=="',
    "max_tokens=1024",
    "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
    "if password == confirm_password:",
    "def login(username: str, password: str) -> Token:",
    "password = os.environ['DB_PASSWORD']",
    "self.token = token",
    "password = None",
    "Use a bearer token in the Authorization header.",
    "ssh git@github.com:org/repo.git",
    "Server listening on http://localhost:8080/health",
    "AKIA is the prefix of AWS access key ids",
    "pip install scikit-learn",
    "The secret to fast tests is good fixtures.",
    "docker run -p 8080:80 nginx",
    "mysql -u root -p mydb",
    "Note on the token: it expires after an hour",
    "export PASSWORD_FILE=/run/secrets/db_password",
    "password: ${DB_PASSWORD}",
    "gh auth login --with-token < token.txt",
    "Pass --token to authenticate.",
    "const { token } = useAuth();",
    "headers = {'Authorization': f'Bearer {token}'}",
    "password_hash = bcrypt.hashpw(pw, salt)",
    "git commit -m 'fix: refresh token before expiry'",
    "class Settings:\n    password: str\n    token: Optional[str] = None",
    "api_key = settings.API_KEY",
    "Remember to rotate the API key every 90 days.",
    "token_count = len(tokens)",
    "private_key_path: ~/.ssh/id_ed25519",
    "用户密码重置流程需要重新设计",
    "curl -u $USER:$PASS https://example.com",
    "Already [REDACTED:password] once; leave it.",
    # Shapes found in real code by running the filter over installed packages.
    'style = {Token: "#d8dee9", Comment: "#616e88"}',
    "token = Error",
    "client = Client(api_key=api_key or self.api_key)",
    'ENV_API_KEY = "ANTHROPIC_API_KEY"',
    '"passwd:dir", "passwd:gecos"',
    "e.g. `user` in `https://user:pass@host:port/path?query#fragment`",
    'client_secret="my-client-secret"',
    "token = await token",
    "def run(token: object) -> None:\n    native_token: object",
    "key = MLKEM768X25519PrivateKey = rust_openssl.hpke.MLKEM768X25519PrivateKey",
]


@pytest.mark.parametrize(("kind", "text", "secret"), POSITIVE)
def test_secret_is_redacted(kind: str, text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert marker(kind) in out


def test_every_kind_but_custom_has_two_examples() -> None:
    counts = {kind: sum(1 for k, _, _ in POSITIVE if k == kind) for kind in KINDS}
    assert all(counts[kind] >= 2 for kind in KINDS if kind != "custom"), counts


@pytest.mark.parametrize("text", NEGATIVE)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DB_PASSWORD=hunter2x ./run.sh", "DB_PASSWORD=[REDACTED:password] ./run.sh"),
        ('password: "s3cr3t!"', 'password: "[REDACTED:password]"'),
        ("'token': 'abc123xyz'", "'token': '[REDACTED:secret]'"),
        ("--password=abc123", "--password=[REDACTED:password]"),
        (
            "redis://:FakeRedisPw1@cache:6379/0",
            "redis://:[REDACTED:url_password]@cache:6379/0",
        ),
        (
            "https://bob:FakePw1@example.com/x",
            "https://bob:[REDACTED:url_password]@example.com/x",
        ),
        ("Authorization: Bearer " + JWT, "Authorization: Bearer [REDACTED:jwt]"),
        (f"token={GHP}", "token=[REDACTED:github_token]"),
    ],
)
def test_key_is_kept_and_only_the_value_goes(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_private_key_without_end_is_redacted_to_the_end() -> None:
    text = f"before\n-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\nmore lines\nand more"
    assert redact(text) == "before\n[REDACTED:private_key]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("keep <private>drop me</private> this", "keep  this"),
        ("a <PRIVATE>x\ny\nz</Private> b <private>c</private> d", "a  b  d"),
        ("safe\n<private>\nnever closed\n" + ANT, "safe\n"),
        ("<private >spaced tag</private > ok", " ok"),
        # Dropping the inner block joins "<priv" + "ate>" into a new, unclosed tag.
        ("x <priv<private>y</private>ate> secret", "x "),
        ("</private> a stray closing tag stays", "</private> a stray closing tag stays"),
    ],
)
def test_private_blocks_are_dropped(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_findings_report_kind_and_span() -> None:
    text = f"key {ANT} and <private>{GHP}</private> done"
    found = Redactor().findings(text)
    assert [kind for kind, _, _ in found] == ["anthropic_key", "private"]
    (_, start, end), (_, p_start, p_end) = found
    assert text[start:end] == ANT
    assert text[p_start:p_end] == f"<private>{GHP}</private>"


def test_findings_on_clean_text_is_empty() -> None:
    assert Redactor().findings("nothing to see here") == []


def test_extra_patterns_redact_the_whole_match() -> None:
    redactor = Redactor([r"ACME-\d{6}", re.compile(r"internal\.example\.(?:com|net)", re.I)])
    out = redactor.redact("ticket ACME-123456 on INTERNAL.example.com, not ACME-12")
    assert out == "ticket [REDACTED:custom] on [REDACTED:custom], not ACME-12"


def test_extra_pattern_that_matches_its_own_marker_does_not_grow() -> None:
    redactor = Redactor(["a", "D", r"\]", r"\w*"])
    once = redactor.redact("a banana")
    assert "a" not in once.replace("[REDACTED:custom]", "")
    assert redactor.redact(once) == once
    assert len(once) <= len("a banana") * len("[REDACTED:custom]")


def test_invalid_extra_pattern_raises_value_error() -> None:
    with pytest.raises(ValueError, match="invalid redaction pattern"):
        Redactor(["(unclosed"])


def test_env_patterns_one_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDMEM_REDACT_PATTERNS", "ACME-\\d+\n\n   \n  foo[bar  \r\nbaz\n")
    assert extra_patterns_from_env() == [r"ACME-\d+", re.escape("foo[bar"), "baz"]


def test_env_patterns_absent_or_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    assert extra_patterns_from_env() == []
    monkeypatch.setenv("MDMEM_REDACT_PATTERNS", "")
    assert extra_patterns_from_env() == []


def test_module_redact_uses_env_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_filter, "_default", None)
    monkeypatch.setenv("MDMEM_REDACT_PATTERNS", r"corp-[0-9]{4}")
    assert redact("id corp-1234 here") == "id [REDACTED:custom] here"


def test_module_redact_follows_the_env_patterns_as_they_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long-lived process (the prompt server) takes each request's environment."""
    monkeypatch.setenv("MDMEM_REDACT_PATTERNS", r"corp-[0-9]{4}")
    assert redact("id corp-1234, acme-99") == "id [REDACTED:custom], acme-99"
    monkeypatch.setenv("MDMEM_REDACT_PATTERNS", r"acme-[0-9]{2}")
    assert redact("id corp-1234, acme-99") == "id corp-1234, [REDACTED:custom]"
    monkeypatch.delenv("MDMEM_REDACT_PATTERNS")
    assert redact("id corp-1234, acme-99") == "id corp-1234, acme-99"


@pytest.mark.parametrize(
    "text",
    [
        "a" * 1_000_000,
        "sk-" * 333_333,
        "password=" * 111_111,
        "password: x " * 83_333,
        "-----BEGIN " * 90_909,
        "-----BEGIN RSA PRIVATE KEY-----" + "A" * 1_000_000,
        "<private>" * 111_111,
        "<priv" * 90_000 + "<private>x</private>" + "ate>" * 90_000,
        "x://" + "a:" * 500_000,
        "eyJaaaaa." * 111_111,
        "--password-" * 90_909,
        'password="' + "\\a" * 500_000,
        "mysql " + " -pa" * 250_000,
        "authorization: bearer " * 45_454,
        "\u0130" * 500_000 + "\ud800" * 10,
    ],
    ids=lambda text: repr(text[:12]),
)
def test_adversarial_megabyte_inputs_finish(text: str) -> None:
    out = redact(text)
    assert redact(out) == out


# Hypothesis: fake secrets of every kind, planted in arbitrary text.

alnum = st.text(ALNUM, min_size=1)
# No "o", "i", "l" or dots: a generated value can never spell "none", "environ" or "env.".
SAFE_ALNUM = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789"
VALUE_CHARS = SAFE_ALNUM + "!^*+_-"


def fixed(chars: str, size: int) -> st.SearchStrategy[str]:
    return st.text(chars, min_size=size, max_size=size)


def ranged(chars: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(chars, min_size=lo, max_size=hi)


value = st.builds(
    lambda a, b, d: a + b + d, fixed(SAFE_ALNUM, 1), ranged(VALUE_CHARS, 6, 30), fixed("0123", 1)
)
token = st.builds(lambda a, d: a + d, ranged(SAFE_ALNUM, 15, 40), fixed("0123456789", 1))


def planted(template: str, secret: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
    """A (text to embed, secret that must vanish) pair."""
    return secret.map(lambda s: (template.format(s), s))


SECRETS = st.one_of(
    planted("{}", ranged(B64URL, 20, 60).map(lambda s: "sk-ant-api03-" + s)),
    planted("{}", ranged(B64URL, 20, 60).map(lambda s: "sk-proj-" + s)),
    planted("{}", st.builds(lambda a, b: "sk-" + a + "7" + b, alnum, ranged(ALNUM, 19, 40))),
    planted(
        "{}",
        st.builds(lambda p, s: p + s, st.sampled_from(["AKIA", "ASIA"]), fixed(ALNUM.upper(), 16)),
    ),
    planted("aws_secret_access_key = {}", fixed(ALNUM + "/+", 40)),
    planted(
        "{}",
        st.builds(
            lambda p, s: p + s,
            st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
            ranged(ALNUM, 36, 40),
        ),
    ),
    planted("{}", ranged(ALNUM + "_", 40, 82).map(lambda s: "github_pat_" + s)),
    planted(
        "{}",
        st.builds(
            lambda p, s: p + s,
            st.sampled_from(["xoxb-", "xoxp-", "xoxa-", "xoxs-"]),
            ranged(ALNUM + "-", 10, 50),
        ),
    ),
    planted("{}", ranged(ALNUM, 8, 40).map(lambda s: "https://hooks.slack.com/services/" + s)),
    planted("{}", fixed(B64URL, 35).map(lambda s: "AIza" + s)),
    planted(
        "{}",
        st.builds(
            lambda h, p, s: f"eyJ{h}.eyJ{p}.{s}",
            ranged(B64URL, 5, 30),
            ranged(B64URL, 5, 60),
            ranged(B64URL, 5, 43),
        ),
    ),
    planted("Authorization: Bearer {}", token),
    planted("Authorization: Basic {}", ranged(ALNUM + "+/", 8, 40)),
    planted("https://user:{}@db.example.com/app", value),
    planted("DB_PASSWORD={}", value),
    planted('password: "{}"', value),
    planted("--password {}", value),
    planted("--token={}", value),
    planted("api_key: {}", value),
    planted("mysql -u root -p{} db", value),
    planted(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
        ranged(ALNUM + "+/", 20, 80),
    ),
)


@given(st.lists(st.tuples(st.text(), SECRETS), min_size=1, max_size=4), st.text())
def test_planted_secrets_never_survive(
    pieces: list[tuple[str, tuple[str, str]]], tail: str
) -> None:
    text = "".join(f"{prose}\n{embed}\n" for prose, (embed, _) in pieces) + tail
    prose = "".join(p for p, _ in pieces) + tail
    assume(not any(secret in prose for _, (_, secret) in pieces))
    out = redact(text)
    for _, (_, secret) in pieces:
        assert secret not in out


FRAGMENTS = st.sampled_from(
    [
        "password",
        "=",
        ": ",
        '"',
        "'",
        "token",
        "--",
        "-p",
        "mysql ",
        "curl -u a:",
        "://",
        "@",
        "<private>",
        "</private>",
        "<priv",
        "ate>",
        "[REDACTED:secret]",
        "[REDACTED:",
        "]",
        "sk-ant-",
        "sk-",
        "eyJ",
        ".",
        "Bearer ",
        "Authorization: ",
        "-----BEGIN ",
        "PRIVATE KEY-----",
        "-----END ",
        "AKIA",
        "ghp_",
        "xoxb-",
        "AIza",
        " ",
        "\n",
        "\\",
        "<password>",
        "</password>",
        "0123456789",
        "abcdefghij",
        "ABCDEFGHIJ",
        "é",
        "\u0130",
    ]
)
noisy_text = st.one_of(st.text(), st.lists(st.one_of(FRAGMENTS, st.text(max_size=5))).map("".join))


@given(noisy_text)
def test_redaction_is_idempotent_and_never_raises(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@given(noisy_text)
def test_output_is_bounded(text: str) -> None:
    assert len(redact(text)) <= max(len(text), 1) * len("[REDACTED:aws_access_key_id]")


@given(st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", min_size=1))
def test_base64_blobs_are_not_secrets(blob: str) -> None:
    # A fixed head, as real images have: a token at the very start of a blob would be
    # indistinguishable from a real one.
    text = f'fixture = "data:image/png;base64,iVBORw0KGgo{blob}=="'
    assert redact(text) == text


# -- needles: a rule runs (and compiles) only on a text that holds its literals ----------

NEEDLE_TEXTS = st.one_of(
    noisy_text,
    SECRETS.map(lambda planted: planted[0]),
    st.tuples(noisy_text, SECRETS, noisy_text).map(lambda t: t[0] + t[1][0] + t[2]),
)


def _needles_hold(text: str) -> None:
    view, _ = _filter._visible(text)
    low = _rules._lower(view)
    for rule in _rules._compiled().rules:
        subject = low if rule.lower else view
        if rule.pattern.search(subject) is not None:
            assert rule.could_match(subject), (rule.pattern.pattern, text)


@pytest.mark.parametrize("text", [t for _, t, _ in POSITIVE] + [t for t in NEGATIVE])
def test_a_rule_that_matches_has_its_needles(text: str) -> None:
    _needles_hold(text)


@given(NEEDLE_TEXTS)
def test_needles_never_hide_a_match(text: str) -> None:
    _needles_hold(text)


def _candidates_hold(text: str) -> None:
    view, _ = _filter._visible(text)
    low = _rules._lower(view)
    patterns = _rules._compiled()
    chosen = patterns.candidates(view, low)
    assert chosen == sorted(chosen, key=patterns.rules.index)  # in the rules' order
    for rule in patterns.rules:
        if rule.could_match(low if rule.lower else view):
            assert rule in chosen, (rule.pattern.pattern, text)


@given(NEEDLE_TEXTS)
def test_the_needle_index_keeps_every_rule_that_could_match(text: str) -> None:
    # The one pass over the needles (_rules._Patterns.candidates) never drops a rule
    # whose own needles the text holds: what is redacted is what every rule would find.
    _candidates_hold(text)


@pytest.mark.parametrize("text", [t for _, t, _ in POSITIVE] + [t for t in NEGATIVE])
def test_the_needle_index_keeps_every_rule_of_the_examples(text: str) -> None:
    _candidates_hold(text)


def test_a_text_without_any_needle_looks_at_no_rule() -> None:
    patterns = _rules._compiled()
    assert patterns.candidates("Bench paths op", "bench paths op") == []
    rules = patterns.candidates("mysql -p hunter22", "mysql -p hunter22")
    assert {rule.kind for rule in rules} >= {"password"}
    assert redact("mysql -uroot -phunter22 db") != "mysql -uroot -phunter22 db"


def test_plain_words_compile_no_secret_pattern() -> None:
    # The per-prompt hook redacts the prompt's first words for the activity log: a prompt
    # with no secret's literal in it compiles none of the rules (each costs ~0.3 ms).
    code = (
        "from mdmem import privacy\n"
        "from mdmem.privacy import _rules\n"
        "assert privacy.redact('how do we deploy the release branch?') "
        "== 'how do we deploy the release branch?'\n"
        "print(sum(r._pattern is not None for r in _rules._compiled().rules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
    # ... and one with a secret still compiles (and finds) what it needs.
    assert redact(f"the key is {ANT}") == f"the key is {marker('anthropic_key')}"
