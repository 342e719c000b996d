"""``mdmem eval extract``: the labelled set, its scoring, and recorded answers through the pipeline.

``fixtures/extract_recorded.json`` holds a model's answers (operations per case
id) written from the labels, so the pipeline around the model (validation,
redaction, the planner, supersession, the files on disk) is scored in CI
without a model: replayed directly (the ``recorded`` provider) and through the
real ``anthropic`` SDK against the fake API. In it, ``en-secret-03``'s answer
echoes the turn's GitHub token, as a model may: it must not reach disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import FIXTURES
from fake_anthropic import FakeAnthropic
from mdmem.cli import app
from mdmem.extract.providers.anthropic import TOOL_NAME, AnthropicProvider
from mdmem.extract.providers.offline import OfflineProvider
from mdmem.manager import extract_eval as ev
from mdmem.store import ledger
from mdmem.store.paths import user_root

RECORDED = FIXTURES / "extract_recorded.json"
# A spread of the set: every kind, both languages and both splits, in a few seconds.
SAMPLE = [
    "en-corr-01", "zh-pref-01", "zh-fact-01", "en-ref-01", "zh-sup-02", "en-sup-01",
    "en-noise-01", "en-secret-03", "zh-private-02", "zh-multi-01",
]  # fmt: skip


def sample() -> list[ev.Case]:
    cases = {c.id: c for c in ev.load_cases()}
    return [cases[i] for i in SAMPLE]


def test_the_set_is_shipped_and_balanced() -> None:
    cases = ev.load_cases()
    assert len(cases) >= 80
    assert len({c.id for c in cases}) == len(cases)
    assert {c.lang for c in cases} == {"en", "zh"}
    assert {c.split for c in cases} == set(ev.SPLITS)
    kinds = {c.kind for c in cases}
    assert {"correction", "preference", "project_fact", "reference", "supersede", "noise",
            "secret", "private"} <= kinds  # fmt: skip
    for split in ev.SPLITS:
        part = ev.load_cases(split)
        assert len(part) >= 40 and {c.split for c in part} == {split}
        assert {c.lang for c in part} == {"en", "zh"}
    # Every changed fact names a starting note the case carries.
    for case in cases:
        for fact in case.expect:
            if fact.supersedes:
                assert fact.supersedes in {n["filename"] for n in case.notes}, case.id
    with pytest.raises(ValueError, match="unknown split"):
        ev.load_cases("train")


@pytest.mark.parametrize(
    "bad",
    [{}, {"id": "x"}, {"id": "x", "split": "tune", "lang": "en", "kind": "k", "turn": 3},
     {"id": "x", "split": "tune", "lang": "en", "kind": "k", "turn": [], "expect": [{}]}],
)  # fmt: skip
def test_a_bad_case_is_one_clear_error(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="eval case"):
        ev.Case.from_mapping(bad)


@given(
    st.lists(st.text(alphabet="abcdef中文端口123", min_size=1, max_size=5), min_size=1, max_size=3),
    st.text(max_size=20),
)
def test_a_fact_is_kept_exactly_when_every_key_is_there(keys: list[str], noise: str) -> None:
    fact = ev.Expected(tuple(keys), "project", ("project_knowledge",))
    assert fact.carried_by(noise.join(k.upper() for k in keys))
    missing = keys[-1]
    if all(missing.casefold() not in k.casefold() for k in keys[:-1]) and (
        missing.casefold() not in noise.casefold()
    ):
        assert not fact.carried_by(noise.join(keys[:-1]) + noise)
    alternatives = ev.Expected(("zzz|" + keys[0],), "project", ("project_knowledge",))
    assert alternatives.carried_by(keys[0])


def test_recorded_answers_score_the_pipeline() -> None:
    replay = ev.RecordedProvider(ev.recorded_answers(str(RECORDED)))
    report = ev.evaluate(sample(), replay.for_case, provider_name="recorded")
    summary = report.summary()
    assert summary["recall"] == 1.0 and summary["precision"] == 1.0
    assert summary["store_accuracy"] == 1.0 and summary["type_accuracy"] == 1.0
    assert summary["noise_notes"] == 0 and summary["supersession"] == 1.0
    # The answer that echoed the GitHub token: redacted on its way to disk.
    assert summary["secrets_on_disk"] == 0, [r.secrets for r in report.results if r.secrets]
    assert set(report.groups()) >= {"split:tune", "split:held-out", "lang:en", "lang:zh"}
    data = report.as_dict()
    json.dumps(data)
    assert all("calls" not in case for case in data["cases"])  # type: ignore[union-attr]


def test_scoring_sees_noise_misses_and_leaks() -> None:
    cases = {c.id: c for c in ev.load_cases()}
    # A secret only its label knows (no pattern can): if a note carries it, the scan finds it.
    leak = ev.Case(
        "leak", "tune", "en", "secret",
        (("user", "The vault phrase for staging is zebra-cobalt-77."),),
        secrets=("zebra-cobalt-77",),
    )  # fmt: skip
    chosen = [cases["en-noise-01"], cases["en-sup-01"], leak]
    note = {"action": "create", "level": "project", "type": "project_knowledge"}
    replay = ev.RecordedProvider(
        {
            # A note for "thanks, looks good": noise.
            "en-noise-01": [{**note, "title": "Thanks", "content": "Looks good."}],
            # The new fact, but not linked to the note it replaces.
            "en-sup-01": [{**note, "title": "pnpm", "content": "Use pnpm."}],
            "leak": [{**note, "title": "Vault", "content": "The phrase is zebra-cobalt-77."}],
        }
    )
    report = ev.evaluate(chosen, replay.for_case)
    by_id = {r.id: r for r in report.results}
    assert by_id["en-noise-01"].noise == 1
    assert by_id["en-sup-01"].kept == 1 and by_id["en-sup-01"].superseded == 0
    assert by_id["leak"].secrets and by_id["leak"].noise == 1
    assert any("MEMORY.md" in where for where in by_id["leak"].secrets)
    summary = report.summary()
    assert summary["supersession"] == 0.0 and summary["secrets_on_disk"] >= 1
    assert summary["precision"] == round(1 / 3, 4)


def test_recorded_answers_through_the_real_sdk(fake_anthropic: FakeAnthropic) -> None:
    """A thinking model (tool_choice auto) replays the recorded answers: tokens and cost counted."""
    answers = ev.recorded_answers(str(RECORDED))
    chosen = sample()[:6]

    def reply(body: dict[str, object]) -> object:
        prompt = FakeAnthropic.last_user_text(body)
        case = next(c for c in chosen if c.turn[-1][1][:30] in prompt)
        return FakeAnthropic.message(
            FakeAnthropic.tool_use_block(TOOL_NAME, answers[case.id]),  # type: ignore[arg-type]
            usage={"input_tokens": 1000, "output_tokens": 100},
        )

    fake_anthropic.enqueue(*[reply] * len(chosen))
    client = anthropic.Anthropic(api_key="k", base_url=fake_anthropic.url, max_retries=0)
    provider = AnthropicProvider("claude-opus-5-5", client=client)
    try:
        report = ev.evaluate(chosen, lambda _c: provider, provider_name="anthropic")
    finally:
        provider.close()
    summary = report.summary()
    assert summary["recall"] == 1.0 and summary["errors"] == 0
    assert all(r.body["tool_choice"] == {"type": "auto"} for r in fake_anthropic.requests)
    calls = sum(1 for r in report.results if r.calls)
    assert calls == len(fake_anthropic.requests) > 0
    assert summary["tokens_per_turn"] == 1100 * calls / len(chosen)
    # claude-opus-5-5 at $4 / $20 per million input / output tokens.
    assert summary["cost_per_turn"] == round(calls * (1000 * 4 + 100 * 20) / 1e6 / len(chosen), 6)
    # What the eval spent goes to the user's own ledger, as turn eval-extract.
    assert ev.record_spend(user_root(), report) == calls
    turns = ledger.load(user_root())["turns"]
    assert isinstance(turns, list) and {t[1] for t in turns} == {"eval-extract"}


def test_nothing_of_a_run_is_left_in_mdmems_state(tmp_path: Path) -> None:
    from mdmem.store.paths import state_base

    before = sorted(Path(state_base()).rglob("*")) if Path(state_base()).exists() else []
    ev.evaluate(sample()[:1], _offline)
    after = sorted(Path(state_base()).rglob("*")) if Path(state_base()).exists() else []
    assert after == before


def _offline(_case: ev.Case) -> OfflineProvider:
    return OfflineProvider()


def test_cli_json_and_text(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = sample()[:2]
    monkeypatch.setattr(ev, "load_cases", lambda split=None, path=None: chosen)
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "extract", "--provider", "offline", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["provider"] == "offline" and data["summary"]["turns"] == 2
    text = runner.invoke(app, ["eval", "extract", "--provider", "offline"]).output
    assert "eval extract: offline, 2 turns" in text and "lang:zh" in text
    bad = runner.invoke(app, ["eval", "extract", "--provider", "gpt"])
    assert bad.exit_code != 0 and "unknown provider" in bad.output
    bad = runner.invoke(app, ["eval", "extract", "--provider", "recorded"])
    assert bad.exit_code != 0 and "--answers" in bad.output


def _offline_ops(case: ev.Case) -> list[dict[str, object]]:
    """The offline provider's answer to a case, the turn redacted as the worker does it."""
    from datetime import date

    from mdmem.extract.providers.base import ExtractionRequest, Message
    from mdmem.privacy import Redactor

    redact = Redactor([]).redact
    lines = {
        level: "\n".join(
            f"- [{n['type']}] {n['title']} — {n.get('summary', '')} ({n['filename']})"
            for n in case.notes
            if n["level"] == level
        )
        for level in ("project", "user")
    }
    request = ExtractionRequest(
        "", "", tuple(Message(r, redact(t)) for r, t in case.turn),
        lines["project"], lines["user"], date(2026, 12, 1),
    )  # fmt: skip
    return [op for op in OfflineProvider().extract(request) if isinstance(op, dict)]


@pytest.mark.parametrize(
    ("split", "recall", "store"), [("tune", 1.0, 1.0), ("held-out", 0.85, 0.9)]
)
def test_the_keyless_default_keeps_what_matters(split: str, recall: float, store: float) -> None:
    """A quick guard of the offline provider's numbers (docs/benchmarks.md has the full run)."""
    expected = kept = right = noise = 0
    for case in ev.load_cases(split):
        ops = _offline_ops(case)
        texts = [
            (str(op["level"]), f"{op['title']}\n{op['summary']}\n{op['content']}") for op in ops
        ]
        expected += len(case.expect)
        if not case.expect:
            noise += len(ops)
        used: set[int] = set()
        for fact in case.expect:
            hit = next(
                (i for i, (_, t) in enumerate(texts) if i not in used and fact.carried_by(t)), None
            )
            if hit is not None:
                used.add(hit)
                kept += 1
                right += texts[hit][0] == fact.level
        for op in ops:
            assert "://" not in str(op["title"]), op["title"]
    assert noise == 0
    assert kept / expected >= recall
    assert right / kept >= store


def test_a_model_run_stops_at_the_daily_budget(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from importlib import resources

    shipped = resources.files("mdmem.manager").joinpath("evalset").joinpath("extract.jsonl")
    wanted = {"en-corr-01", "en-pref-01", "en-fact-01"}
    lines = [
        line for line in shipped.read_text("utf-8").splitlines() if json.loads(line)["id"] in wanted
    ]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
    reply = FakeAnthropic.message(
        FakeAnthropic.tool_use_block(TOOL_NAME, {"operations": []}),
        usage={"input_tokens": 1000, "output_tokens": 100},
    )
    fake_anthropic.enqueue(reply, reply)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    monkeypatch.setenv("MDMEM_DAILY_TOKENS", "1500")
    report = ev.run("anthropic", cases=str(cases))
    assert len(report.results) == 2 and "MDMEM_DAILY_TOKENS" in report.stopped
    assert ledger.tokens_on(user_root(), ledger.day_of(__import__("time").time())) == 2200
