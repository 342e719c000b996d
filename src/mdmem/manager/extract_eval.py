"""``mdmem eval extract``: what a provider keeps from labelled turns, scored without a model.

The labelled set ships with the package (``evalset/extract.jsonl``): about 120
turns from coding sessions, in English and Chinese, each with the notes the
stores hold before it (for facts that changed), what a careful person would
have written down (a fact's key words, its store and its type, the note it
supersedes) and the secrets that must never reach disk. Every case carries its
split: ``tune`` (the offline provider's rules were written against it) or
``held-out`` (never used to tune; its numbers are the honest ones).

Each case runs through the real pipeline: a :class:`~mdmem.manager.Manager`
over a fresh workspace and user store in a temporary folder inside mdmem's own
state (``<state>/eval/run-*``, with its own state folder, removed after the
case, so nothing of the run is left behind), the turn handed to
``update_async``, the provider's answer validated, redacted and applied by the
worker. Then the files are scored:

* a fact is **kept** when one note the turn wrote carries all its key words
  (each key may list alternatives, ``a|b``; case-insensitive);
* **precision**: the written notes that carry an expected fact, of all written;
* **store / type accuracy**: of the kept facts, those in the right store, of
  the right type;
* **noise notes**: notes written for a turn with nothing worth keeping;
* **secrets**: labelled secrets found in any file of the run (stores and state);
* **supersession**: of the facts that replace an existing note, those whose
  note names it in ``supersedes`` (or that updated or deleted it).

Tokens come from the run's own usage ledger; the cost, where the model's
price is known (:data:`PRICES`). The calls are then recorded in the user's
real ledger too (turn ``eval-extract``), so ``mdmem stats`` and the daily
budget count them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING

from mdmem._kinds import Level
from mdmem.errors import MdmemError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mdmem.extract.providers.base import Answer, ExtractionRequest, Provider

__all__ = [
    "PRICES",
    "SPLITS",
    "Case",
    "Expected",
    "RecordedProvider",
    "Report",
    "evaluate",
    "load_cases",
    "recorded_answers",
]

SPLITS = ("tune", "held-out")
#: USD per million tokens (input, output, cache read, cache write), by model name prefix,
#: as Anthropic's pages state them ("Claude Opus 5.5 migration guide": $4 / $20).
PRICES: dict[str, tuple[float, float, float, float]] = {
    "claude-opus-5-5": (4.0, 20.0, 0.4, 5.0),
}
_DATA = "extract.jsonl"


@dataclass(frozen=True)
class Expected:
    """One thing a turn should leave behind."""

    keys: tuple[str, ...]
    """Key words a note must carry, all of them; ``a|b`` accepts either."""
    level: str
    types: tuple[str, ...]
    """The note types that are right for it (usually one)."""
    supersedes: str | None = None
    """The starting note this fact replaces."""

    def carried_by(self, text: str) -> bool:
        """Whether ``text`` (a note's title, summary and body) carries every key."""
        low = text.casefold()
        return all(
            any(alt.strip().casefold() in low for alt in key.split("|") if alt.strip())
            for key in self.keys
        )


@dataclass(frozen=True)
class Case:
    """One labelled turn."""

    id: str
    split: str
    lang: str
    kind: str
    turn: tuple[tuple[str, str], ...]
    notes: tuple[Mapping[str, str], ...] = ()
    expect: tuple[Expected, ...] = ()
    secrets: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Case:
        """A case from its JSON form.

        Raises:
            ValueError: a field is missing or of the wrong shape.
        """
        try:
            expect = []
            for item in data.get("expect") or []:  # type: ignore[attr-defined]
                kind = item["type"]
                expect.append(
                    Expected(
                        keys=tuple(str(k) for k in item["keys"]),
                        level=str(item["level"]),
                        types=tuple(kind) if isinstance(kind, list) else (str(kind),),
                        supersedes=item.get("supersedes"),
                    )
                )
            return cls(
                id=str(data["id"]),
                split=str(data["split"]),
                lang=str(data["lang"]),
                kind=str(data["kind"]),
                turn=tuple((str(r), str(t)) for r, t in data["turn"]),  # type: ignore[attr-defined]
                notes=tuple(dict(n) for n in data.get("notes") or []),  # type: ignore[attr-defined]
                expect=tuple(expect),
                secrets=tuple(str(s) for s in data.get("secrets") or []),  # type: ignore[attr-defined]
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"eval case {data.get('id')!r}: {exc!r}") from None


def load_cases(split: str | None = None, path: str | None = None) -> list[Case]:
    """The labelled set shipped with mdmem (or the JSON-lines file at ``path``).

    Raises:
        ValueError: ``split`` is not one of :data:`SPLITS`, or a line is not a case.
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
    if path is None:
        data = resources.files("mdmem.manager").joinpath("evalset").joinpath(_DATA)
        text = data.read_text("utf-8")
    else:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    cases = [Case.from_mapping(json.loads(line)) for line in text.splitlines() if line.strip()]
    return [c for c in cases if split is None or c.split == split]


class RecordedProvider:
    """Replays recorded model answers (operations per case id), for CI and for comparison.

    The eval tells it which case runs (:meth:`for_case`); a case with no
    recorded answer gets ``[]``.
    """

    name = "recorded"

    def __init__(self, answers: Mapping[str, object]) -> None:
        self.answers = dict(answers)
        self.case: str | None = None
        self.requests: list[ExtractionRequest] = []

    def for_case(self, case: Case) -> RecordedProvider:
        """This provider, answering for ``case`` from now on."""
        self.case = case.id
        return self

    def extract(self, request: ExtractionRequest) -> Answer:
        """The recorded answer of the current case."""
        self.requests.append(request)
        answer = self.answers.get(self.case or "", [])
        return answer if isinstance(answer, (list, dict, str)) else []


def recorded_answers(path: str) -> dict[str, object]:
    """A recorded-answers file: a JSON object of case id to the model's operations.

    Raises:
        ValueError: the file is not such an object.
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of case id to operations")
    return data


class _Borrowed:
    """A provider lent to one case's Manager, which must not close it (the run does, once)."""

    def __init__(self, provider: Provider) -> None:
        self._provider = provider
        self.name = provider.name
        self.model = str(getattr(provider, "model", "") or "")

    @property
    def last_usage(self) -> object:
        return getattr(self._provider, "last_usage", None)

    def extract(self, request: ExtractionRequest) -> Answer:
        return self._provider.extract(request)


@dataclass
class CaseResult:
    """What one case left behind and how it scored."""

    id: str
    split: str
    lang: str
    kind: str
    expected: int = 0
    kept: int = 0
    right_store: int = 0
    right_type: int = 0
    written: int = 0
    useful: int = 0
    noise: int = 0
    supersede_expected: int = 0
    superseded: int = 0
    secrets: list[str] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)
    cost: float | None = 0.0
    error: str | None = None
    notes: list[dict[str, object]] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    calls: list[dict[str, object]] = field(default_factory=list, repr=False)
    """The ledger events of the case's model calls (not in the JSON report)."""

    def as_dict(self) -> dict[str, object]:
        """The case's result as JSON-ready data."""
        return {k: v for k, v in vars(self).items() if k != "calls"}


def _rates(results: Sequence[CaseResult]) -> dict[str, object]:
    expected = sum(r.expected for r in results)
    kept = sum(r.kept for r in results)
    written = sum(r.written for r in results)
    sup = sum(r.supersede_expected for r in results)
    tokens = sum(sum(r.tokens.values()) for r in results)
    costs = [r.cost for r in results]
    cost = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)

    def ratio(a: int, b: int) -> float | None:
        return round(a / b, 4) if b else None

    return {
        "turns": len(results),
        "facts": expected,
        "kept": kept,
        "notes": written,
        "precision": ratio(sum(r.useful for r in results), written),
        "recall": ratio(kept, expected),
        "store_accuracy": ratio(sum(r.right_store for r in results), kept),
        "type_accuracy": ratio(sum(r.right_type for r in results), kept),
        "noise_notes": sum(r.noise for r in results),
        "secrets_on_disk": sum(len(r.secrets) for r in results),
        "supersession": ratio(sum(r.superseded for r in results), sup),
        "errors": sum(1 for r in results if r.error),
        "tokens_per_turn": round(tokens / len(results), 1) if results else 0.0,
        "cost_per_turn": round(cost / len(results), 6) if cost is not None and results else None,
    }


@dataclass
class Report:
    """The outcome of :func:`evaluate`; ``as_dict`` is what ``--json`` prints."""

    provider: str
    model: str = ""
    results: list[CaseResult] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = ""
    """Why the run stopped before the last case (empty: it ran them all)."""

    def summary(self, results: Sequence[CaseResult] | None = None) -> dict[str, object]:
        """Precision, recall, accuracies, noise, secrets, supersession, tokens, cost."""
        return _rates(self.results if results is None else results)

    def groups(self) -> dict[str, dict[str, object]]:
        """The summary per split, language and kind (``split:x``, ``lang:x``, ``kind:x``)."""
        out: dict[str, dict[str, object]] = {}
        for attr in ("split", "lang", "kind"):
            values = sorted({getattr(r, attr) for r in self.results})
            for value in values:
                chosen = [r for r in self.results if getattr(r, attr) == value]
                out[f"{attr}:{value}"] = _rates(chosen)
        return out

    def as_dict(self, *, cases: bool = True) -> dict[str, object]:
        """The report as JSON-ready data."""
        data: dict[str, object] = {
            "provider": self.provider,
            "model": self.model,
            "summary": self.summary(),
            "groups": self.groups(),
            "seconds": round(self.seconds, 2),
            "stopped": self.stopped,
        }
        if cases:
            data["cases"] = [r.as_dict() for r in self.results]
        return data


@contextmanager
def _private_state(folder: str) -> Iterator[None]:
    """mdmem's state for the run in ``folder``: nothing of it lands in the user's state."""
    saved = os.environ.get("MDMEM_STATE_DIR")
    os.environ["MDMEM_STATE_DIR"] = folder
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("MDMEM_STATE_DIR", None)
        else:
            os.environ["MDMEM_STATE_DIR"] = saved


def _seed(store: object, notes: Iterable[Mapping[str, str]]) -> None:
    from mdmem.store.store import Store

    assert isinstance(store, Store)
    ops = [
        {
            "action": "create",
            "level": n["level"],
            "type": n["type"],
            "title": n["title"],
            "summary": n.get("summary", ""),
            "content": n.get("body", ""),
            "filename": n["filename"],
        }
        for n in notes
    ]
    if ops:
        result = store.apply(ops, source="eval")
        if result.rejected:
            raise MdmemError(f"eval: cannot seed {result.rejected[0].reason}")


def _snapshot(root: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    if os.path.isdir(root):
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if name.endswith(".md") and name != "MEMORY.md" and os.path.isfile(path):
                with open(path, "rb") as f:
                    out[name] = f.read()
    return out


def _scan(folder: str, secrets: Sequence[str]) -> list[str]:
    """The secrets found in any file under ``folder``, each as ``secret in path``."""
    found: list[str] = []
    wanted = [(s, s.encode("utf-8")) for s in secrets if s]
    if not wanted:
        return found
    for base, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(base, name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            for secret, raw in wanted:
                if raw in data:
                    found.append(f"{secret[:6]}… in {os.path.relpath(path, folder)}")
    return found


def _cost(model: str, tokens: Mapping[str, int]) -> float | None:
    for prefix, price in PRICES.items():
        if model.startswith(prefix):
            amounts = (
                tokens.get("in", 0),
                tokens.get("out", 0),
                tokens.get("cr", 0),
                tokens.get("cw", 0),
            )
            return sum(a * p for a, p in zip(amounts, price, strict=True)) / 1_000_000
    return None


def _calls(user_root: str) -> list[dict[str, object]]:
    from mdmem.store import ledger

    path = os.path.join(ledger.folder(user_root), "events.jsonl")
    out: list[dict[str, object]] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                with suppress(ValueError):
                    event = json.loads(line)
                    if isinstance(event, dict) and event.get("k") == "call":
                        out.append(event)
    except OSError:
        pass
    return out


def run_case(case: Case, provider: Provider, *, timeout: float = 300.0) -> CaseResult:
    """Run one case through a real Manager in a temporary folder, and score what it wrote."""
    from mdmem.manager.manager import Manager
    from mdmem.store.paths import state_base
    from mdmem.store.store import Store

    result = CaseResult(case.id, case.split, case.lang, case.kind, expected=len(case.expect))
    # Inside mdmem's own (private) state, never beside the user's files; removed after.
    parent = os.path.join(state_base(), "eval")
    os.makedirs(parent, mode=0o700, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="run-", dir=parent)
    try:
        workspace = os.path.join(tmp, "workspace")
        user_dir = os.path.join(tmp, "user")
        os.makedirs(os.path.join(workspace, ".PseudoClaude"))
        os.makedirs(user_dir)
        with _private_state(os.path.join(tmp, "state")):
            project = Store(os.path.join(workspace, ".PseudoClaude", "memory"), Level.PROJECT)
            user = Store(user_dir, Level.USER)
            for store in (project, user):
                _seed(store, [n for n in case.notes if n["level"] == store.level.value])
            before = {s.level.value: _snapshot(s.path) for s in (project, user)}
            manager = Manager(
                workspace,
                user_dir=user_dir,
                provider=_Borrowed(provider),
                discover=False,
                resume=False,
                review="off",
                max_attempts=1,
                # The run checks the user's real budget between cases (see run()); the
                # temporary ledger here must not hold a turn for a day.
                daily_tokens=1 << 62,
            )
            try:
                future = manager.update_async([{"role": r, "content": t} for r, t in case.turn])
                try:
                    outcome = future.result(timeout=timeout)
                except Exception as exc:  # a provider failure is this case's result
                    result.error = str(exc)[:300]
                else:
                    if outcome.held:
                        result.error = "held by a token budget"
            finally:
                manager.close(timeout=timeout)
            _score(case, result, (project, user), before)
            calls = _calls(user_dir)
        keys = ("in", "out", "cr", "cw")
        tokens = {k: sum(int(str(c.get(k, 0) or 0)) for c in calls) for k in keys}
        result.tokens = tokens
        model = str(calls[-1].get("model", "")) if calls else ""
        result.cost = 0.0 if not calls else _cost(model, tokens)
        result.secrets = _scan(tmp, case.secrets)
        result.calls = calls
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        with suppress(OSError):
            os.rmdir(parent)  # only when no other run is using it
    return result


def _score(
    case: Case,
    result: CaseResult,
    stores: Sequence[object],
    before: Mapping[str, Mapping[str, bytes]],
) -> None:
    from mdmem.store.store import Store

    written: list[tuple[str, str, str, str, tuple[str, ...]]] = []  # level, name, type, text, sup
    gone: dict[str, set[str]] = {}
    for store in stores:
        assert isinstance(store, Store)
        level = store.level.value
        now = _snapshot(store.path)
        gone[level] = set(before[level]) - set(now)
        for name, raw in sorted(now.items()):
            if before[level].get(name) == raw:
                continue
            note = store.read(name)
            sup = note.extra.get("supersedes")
            names = tuple(sup) if isinstance(sup, list) else ((str(sup),) if sup else ())
            text = f"{note.title}\n{note.summary}\n{note.body}"
            written.append((level, name, note.type.value, text, tuple(str(s) for s in names)))
            result.notes.append(
                {"level": level, "filename": name, "type": note.type.value, "title": note.title}
            )
    result.written = len(written)
    used: set[int] = set()
    for fact in case.expect:
        if fact.supersedes:
            result.supersede_expected += 1
        # Of the notes that carry the fact, the one in its store and of its type first:
        # a note holding two facts must not take the other's place.
        candidates = [i for i, w in enumerate(written) if i not in used and fact.carried_by(w[3])]
        candidates.sort(
            key=lambda i: (written[i][0] != fact.level, written[i][2] not in fact.types)
        )
        match = candidates[0] if candidates else None
        if match is None:
            result.missed.append(" + ".join(fact.keys))
            continue
        used.add(match)
        level, name, kind, _text, sup = written[match]
        result.kept += 1
        result.right_store += level == fact.level
        result.right_type += kind in fact.types
        if fact.supersedes and (
            fact.supersedes in sup
            or name == fact.supersedes
            or fact.supersedes in gone.get(level, set())
        ):
            result.superseded += 1
    result.useful = sum(1 for w in written if any(f.carried_by(w[3]) for f in case.expect))
    if not case.expect:
        result.noise = len(written)


def evaluate(
    cases: Sequence[Case],
    provider_for: Callable[[Case], Provider],
    *,
    provider_name: str = "",
    model: str = "",
    progress: Callable[[int, int], None] | None = None,
    timeout: float = 300.0,
    room: Callable[[Report], bool] | None = None,
) -> Report:
    """Run every case through the pipeline with the provider ``provider_for`` gives it.

    ``room`` is asked before each case; when it says no (a daily budget spent),
    the run stops there and ``stopped`` says why.
    """
    start = time.monotonic()
    report = Report(provider=provider_name, model=model)
    for done, case in enumerate(cases):
        if room is not None and not room(report):
            report.stopped = "the daily token budget (MDMEM_DAILY_TOKENS) is spent"
            break
        report.results.append(run_case(case, provider_for(case), timeout=timeout))
        if progress is not None:
            progress(done + 1, len(cases))
    report.seconds = time.monotonic() - start
    return report


def record_spend(user_root: str, report: Report) -> int:
    """Record the run's model calls in the user's real ledger (turn ``eval-extract``).

    So the daily budget and ``mdmem stats`` count what the eval spent. Returns
    how many calls were recorded.
    """
    from mdmem.store import ledger

    events: list[tuple[str, float | None, dict[str, object]]] = []
    for result in report.results:
        for call in result.calls:
            fields = {k: v for k, v in call.items() if k not in ("k", "t", "turn", "workspace")}
            t = call.get("t")
            when = float(t) if isinstance(t, (int, float)) else None
            events.append(("call", when, {**fields, "turn": "eval-extract"}))
    if events:
        ledger.record_many(user_root, events)
    return len(events)


def run(
    provider: str | None = None,
    *,
    split: str | None = None,
    answers: str | None = None,
    cases: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """``mdmem eval extract``: the labelled set through the named provider, scored.

    ``provider`` is one of the provider names, ``recorded`` (replay the answers
    file ``answers``), or None for the one the environment selects
    (:func:`mdmem.extract.providers.choose`). The model calls are recorded in
    the user's real ledger afterwards (:func:`record_spend`).

    Raises:
        ValueError: an unknown provider or split, or ``recorded`` without answers.
    """
    from mdmem.extract.providers import NAMES, choose, make
    from mdmem.manager.manager import budget_from_env
    from mdmem.store import ledger
    from mdmem.store.paths import user_root

    chosen = load_cases(split, cases)
    if provider == "recorded":
        if not answers:
            raise ValueError("the recorded provider needs --answers FILE (case id -> operations)")
        replay = RecordedProvider(recorded_answers(answers))
        report = evaluate(chosen, replay.for_case, provider_name="recorded")
        return report
    name = provider or choose()[0]
    try:
        shared = make(name)
    except ValueError:
        known = ", ".join((*NAMES, "recorded"))
        raise ValueError(f"unknown provider {name!r}: expected one of {known}") from None
    name = shared.name
    model = str(getattr(shared, "model", "") or "")
    daily = budget_from_env("MDMEM_DAILY_TOKENS")
    home = user_root()

    def room(report: Report) -> bool:
        # The run's own calls are in its temporary ledgers until the end: count both.
        if daily is None or name == "offline":
            return True
        spent = sum(sum(r.tokens.values()) for r in report.results)
        return ledger.tokens_on(home, ledger.day_of(time.time())) + spent < daily

    try:
        report = evaluate(
            chosen,
            lambda _case: shared,
            provider_name=name,
            model=model,
            progress=progress,
            room=room,
        )
    finally:
        close = getattr(shared, "close", None)
        if callable(close):
            close()
    record_spend(home, report)
    return report
