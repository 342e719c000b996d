"""The ledger's read counts, brought up to date from a kept record: the same as a full fold.

The per-prompt hook keeps ``ledger.read_counts``' record in the search index and
hands it back at the next prompt, so only the events appended since are folded
(SessionStart appends one line before every session's first prompt). Whatever
was appended, rotated, compacted or half-written between two calls, the counts
must be those a full fold of the ledger gives.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdmem.store import ledger
from mdmem.store.state import StateDir

T0 = 1_796_083_200.0
NAMES = [f"n{i}.md" for i in range(12)]


def _full(root: str) -> dict[str, tuple[int, float]]:
    """The read counts as a full ``ledger.load`` folds them (what the hook used before)."""
    out: dict[str, tuple[int, float]] = {}
    notes = ledger.load(root)["notes"]
    assert isinstance(notes, dict)
    for name, entry in notes.items():
        if int(entry.get("read", 0) or 0) > 0:
            out[name] = (int(entry["read"]), float(entry.get("last_read", 0) or 0))
    return out


_event = st.tuples(
    st.sampled_from(["read", "inject", "write", "call", "skip"]),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
    st.floats(min_value=0, max_value=10_000, allow_nan=False),
)
#: Between two calls: events appended, maybe a damaged or half-written line, maybe a fold.
_step = st.tuples(
    st.lists(_event, max_size=6),
    st.sampled_from(["", "garbage", "partial", "compact"]),
)


def _append_raw(root: str, data: bytes) -> None:
    base = StateDir.of(root).usage
    os.makedirs(base, exist_ok=True)
    with open(os.path.join(base, "events.jsonl"), "ab") as f:
        f.write(data)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(_step, min_size=1, max_size=6))
def test_counts_from_a_kept_record_equal_a_full_fold(tmp_path_factory, steps) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path_factory.mktemp("ledger") / "store")
    os.makedirs(root)
    kept: str | None = None
    partial = b""
    for events, extra in steps:
        if partial:  # the half-written line of the last step is finished now
            _append_raw(root, partial)
            partial = b""
        for kind, names, dt in events:
            ledger.record(root, kind, T0 + dt, n=names, via="test")
        if extra == "garbage":
            _append_raw(root, b"{not json\n")
        elif extra == "partial":
            line = b'{"t":%d,"k":"read","n":["n0.md"]}\n' % int(T0 + 5)
            _append_raw(root, line[:9])
            partial = line[9:]
        elif extra == "compact":
            ledger.compact(root)
        counts, kept = ledger.read_counts(root, kept)
        if partial:
            # A line being appended is not folded yet, by either way of counting.
            assert counts == ledger.read_counts(root)[0]
        else:
            assert counts == _full(root)


def test_only_the_appended_lines_are_read(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    root = str(tmp_path)
    for i in range(200):
        ledger.record(root, "read" if i % 3 else "inject", T0 + i, n=[f"n{i % 7}.md"], via="t")
    counts, kept = ledger.read_counts(root)
    ledger.record(root, "read", T0 + 500, n=["n1.md"], via="t")
    folded: list[int] = []
    real = ledger._events_in

    def counting(data: bytes):  # type: ignore[no-untyped-def]
        folded.append(len(data))
        return real(data)

    monkeypatch.setattr(ledger, "_events_in", counting)
    again, _ = ledger.read_counts(root, kept)
    assert len(folded) == 1 and folded[0] < 100  # the one new line, not the ledger
    assert again["n1.md"] == (counts["n1.md"][0] + 1, T0 + 500)
    monkeypatch.setattr(ledger, "_events_in", real)
    assert again == _full(root)


def test_past_the_bound_on_notes_a_new_name_folds_it_all(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The full fold keeps the KEEP_NOTES most recently used notes: a note never seen
    # before could push one out, so then the whole ledger is folded again.
    monkeypatch.setattr(ledger, "KEEP_NOTES", 5)
    root = str(tmp_path)
    for i in range(5):
        ledger.record(root, "read", T0 + i, n=[f"n{i}.md"], via="t")
    _, kept = ledger.read_counts(root)
    ledger.record(root, "read", T0 + 10, n=["n9.md"], via="t")  # a sixth note: n0 goes
    counts, kept = ledger.read_counts(root, kept)
    assert counts == _full(root) and "n0.md" not in counts and "n9.md" in counts
    ledger.record(root, "read", T0 + 11, n=["n9.md"], via="t")  # a known one: incremental
    counts, _ = ledger.read_counts(root, kept)
    assert counts == _full(root) and counts["n9.md"] == (2, T0 + 11)
