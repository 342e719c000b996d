"""How well a user's own notes can be found: LLM-free probes built from the notes themselves.

For each note (or a fixed random sample of a large store), one sentence of its
body (or its summary, when the body has no usable sentence) becomes a query,
and that note is the answer. :func:`evaluate` runs every probe through the
same ranking as recall and reports hit@1 and hit@5 overall, per level and per
type, and the notes that were hardest to find. It stops at a time limit and
says how many probes it ran.

With ``ask`` (a model, e.g. a provider's ``ask``), :func:`model_questions`
has the model write each probe's query instead: a question in its own words
that the note answers, which tests paraphrase rather than recall of a
sentence. Notes go to the model in batches of :data:`BATCH`, under made-up
ids; a note whose question does not come back keeps its sentence.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdmem.recall.engine import index_of, search
from mdmem.recall.text import terms

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mdmem.recall.view import StoreView as Store

__all__ = ["BATCH", "Miss", "Probe", "Report", "evaluate", "model_questions", "probes"]

#: Notes per request when a model writes the questions.
BATCH = 10
_QUESTION_SYSTEM = (
    "You write test questions for a search engine over a developer's notes. For each note "
    "you are given, write ONE question a developer would ask whose answer is in that note. "
    "Use your own words: do not copy the note's title or its distinctive phrases. Write the "
    "question in the note's language. Reply with only a JSON object that maps each note's id "
    'to its question, e.g. {"n1": "How do we ...?"}.'
)
_NOTE_CHARS = 1500

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|\n+")
_MIN_TERMS = 3


@dataclass(frozen=True)
class Probe:
    """A query made from a note, and the note that answers it."""

    level: str
    filename: str
    type: str
    query: str


@dataclass(frozen=True)
class Miss:
    """A note its probe did not find in the top 5: ``rank`` is its place in the top 10, or None."""

    level: str
    filename: str
    title: str
    query: str
    rank: int | None


@dataclass
class Report:
    """The outcome of :func:`evaluate` (rates are 0-1; ``groups`` maps ``level:x``/``type:x``)."""

    notes: int = 0
    probes: int = 0
    run: int = 0
    hit1: float = 0.0
    hit5: float = 0.0
    groups: dict[str, dict[str, float]] = field(default_factory=dict)
    hard: list[Miss] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False
    source: str = "sentences"
    """Where the queries came from: ``sentences`` of the notes, or ``model``-written."""

    def as_dict(self) -> dict[str, object]:
        """The report as JSON-ready data."""
        return {
            "notes": self.notes,
            "probes": self.probes,
            "run": self.run,
            "hit@1": round(self.hit1, 4),
            "hit@5": round(self.hit5, 4),
            "groups": self.groups,
            "hard": [vars(m) for m in self.hard],
            "seconds": round(self.seconds, 3),
            "stopped_early": self.stopped_early,
            "source": self.source,
        }


def _pick_sentence(body: str, fallback: str) -> str | None:
    sentences = [s.strip() for s in _SENTENCE.split(body) if len(terms(s)) >= _MIN_TERMS]
    if sentences:
        # The most telling sentence: the one with the most distinct terms.
        return max(sentences, key=lambda s: (len(set(terms(s))), -len(s)))
    return fallback if len(terms(fallback)) >= _MIN_TERMS else None


def probes(stores: Sequence[Store], *, limit: int = 500, seed: int = 0) -> tuple[list[Probe], int]:
    """Probes for the visible notes of ``stores`` (at most ``limit``, a fixed random sample).

    Returns the probes and how many visible notes there are.
    """
    out: list[Probe] = []
    total = 0
    for store in stores:
        index = index_of(store, fresh=True)  # every note: a full check
        hidden = index.hidden()
        for row in sorted(index.rows(), key=lambda r: r.name):
            if row.name in hidden:
                continue
            total += 1
            query = _pick_sentence(row.body, row.summary)
            if query is not None:
                out.append(Probe(store.level.value, row.name, row.type, query))
    if len(out) > limit:
        out = sorted(random.Random(seed).sample(out, limit), key=lambda p: (p.level, p.filename))
    return out, total


def _questions_of(text: str) -> dict[str, str]:
    """The ``{id: question}`` object in a model's answer (prose around it is ignored)."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return {str(k): v.strip() for k, v in value.items() if isinstance(v, str) and v.strip()}
        start = text.find("{", start + 1)
    return {}


def model_questions(
    stores: Sequence[Store], todo: Sequence[Probe], ask: Callable[[str, str], str]
) -> list[Probe]:
    """``todo`` with each query replaced by a question the model wrote about its note.

    ``ask(system, prompt)`` returns the model's text. Raises what ``ask`` raises.
    """
    by_level = {store.level.value: store for store in stores}
    out: list[Probe] = []
    for first in range(0, len(todo), BATCH):
        batch = list(todo[first : first + BATCH])
        parts = []
        for i, probe in enumerate(batch, 1):
            note = by_level[probe.level].read(probe.filename)
            text = f"{note.title}\n{note.summary}\n{note.body}"[:_NOTE_CHARS]
            parts.append(f'<note id="n{i}">\n{text}\n</note>')
        written = _questions_of(ask(_QUESTION_SYSTEM, "\n\n".join(parts)))
        for i, probe in enumerate(batch, 1):
            question = written.get(f"n{i}", "")[:500]
            out.append(Probe(probe.level, probe.filename, probe.type, question or probe.query))
    return out


def evaluate(
    stores: Sequence[Store],
    *,
    limit: int = 500,
    seconds: float = 60.0,
    semantic: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
    ask: Callable[[str, str], str] | None = None,
) -> Report:
    """Run the probes of ``stores`` through recall's ranking (see the module docstring).

    ``ask``: a model writes the queries (:func:`model_questions`); the time limit
    counts from after it has.
    """
    todo, total = probes(stores, limit=limit)
    if ask is not None and todo:
        todo = model_questions(stores, todo, ask)
    started = time.monotonic()
    report = Report(notes=total, probes=len(todo), source="model" if ask else "sentences")
    counts: dict[str, list[int]] = {}
    titles: dict[str, str] = {}
    misses: list[Miss] = []
    for done, probe in enumerate(todo, 1):
        if time.monotonic() - started > seconds:
            report.stopped_early = True
            break
        hits = search(stores, probe.query, limit=10, semantic=semantic)
        ranks = [
            i
            for i, h in enumerate(hits, 1)
            if h.filename == probe.filename and h.level.value == probe.level
        ]
        rank = ranks[0] if ranks else None
        if rank is None or rank > 5:
            title = titles.get(probe.filename)
            if title is None:
                title = next(
                    (
                        h.title
                        for h in search(stores, probe.query, limit=50, semantic=False)
                        if h.filename == probe.filename
                    ),
                    probe.filename,
                )
            misses.append(Miss(probe.level, probe.filename, title, probe.query, rank))
        for key in ("all", f"level:{probe.level}", f"type:{probe.type}"):
            c = counts.setdefault(key, [0, 0, 0])
            c[0] += 1
            c[1] += rank == 1
            c[2] += rank is not None and rank <= 5
        report.run = done
        if progress is not None:
            progress(done, len(todo))
    overall = counts.get("all", [0, 0, 0])
    report.hit1 = overall[1] / overall[0] if overall[0] else 0.0
    report.hit5 = overall[2] / overall[0] if overall[0] else 0.0
    report.groups = {
        key: {"n": c[0], "hit@1": round(c[1] / c[0], 4), "hit@5": round(c[2] / c[0], 4)}
        for key, c in sorted(counts.items())
        if key != "all"
    }
    misses.sort(key=lambda m: (m.rank is not None, -(m.rank or 0), m.level, m.filename))
    report.hard = misses[:20]
    report.seconds = time.monotonic() - started
    return report
