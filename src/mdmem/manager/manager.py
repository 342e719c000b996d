"""Manager: the two stores of a workspace, the prompt block, and background extraction.

The runner calls :meth:`Manager.update_async` after a top-level agent turn
that completed normally. The call writes the turn (redacted) to a journal on
disk and returns a future at once. One worker thread per Manager then, turn by
turn and under both stores' turn locks (so across processes too):

    the prompt block + the notes related to the turn -> the prompt -> provider
    -> operations
    -> validate -> apply to the project store, then the user store
    -> refresh the prompt block -> drop the turn from the journal

A turn whose process exits or is killed stays in the journal and is finished
by the next Manager that starts in the same workspace.

Cost control sits right before the model call: a turn with nothing worth a
call (acknowledgements and tool churn, :func:`mdmem.extract.turn.worth_a_call`)
is skipped and counted; a turn that would take the day past
``MDMEM_DAILY_TOKENS`` waits in the journal until the next (UTC) day; a turn
larger than ``MDMEM_TURN_TOKENS`` is set aside for a person. Every call's
tokens go to the usage ledger of the user store (:mod:`mdmem.store.ledger`),
which is shared by all of a person's workspaces, as a budget must be.

Nothing here raises into the agent: failures go to the ``mdmem`` logger and to
the turn's future.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
import time
import weakref
from collections import deque
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, NoReturn

from mdmem._kinds import Level, NoteType
from mdmem.errors import MdmemError, ProviderError, StoreError
from mdmem.extract import prompt
from mdmem.extract import turn as turn_
from mdmem.extract.providers.base import Message
from mdmem.manager import feedback, provenance
from mdmem.manager import review as review_
from mdmem.manager._journal import Journal, new_turn_id, put_pending
from mdmem.manager.turn_record import MAX_OPERATIONS, Answer, Failure, Turn, sort_answer
from mdmem.privacy import (
    Redactor,
    extra_patterns_from_env,
    install_log_filter,
)
from mdmem.store import ledger
from mdmem.store import state as layout
from mdmem.store.block import PROJECT_HEADING, USER_HEADING, cached_block, line_filename
from mdmem.store.marks import dated_index
from mdmem.store.operations import Create, Update, format_op, parse_answer
from mdmem.store.paths import discover_workspace, project_root, user_root
from mdmem.store.results import ApplyResult, Hit, Rejected
from mdmem.store.store import Store, prepare_writes

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import TracebackType

    from mdmem.extract.providers.base import ExtractionRequest, Provider
    from mdmem.store.state import StateDir

__all__ = ["MAX_OPERATIONS", "Manager", "TurnResult", "budget_from_env"]

log = logging.getLogger("mdmem")

JOURNAL_DIR = layout.TURNS
#: Tokens a budget check allows for the model's answer, on top of the prompt's estimate.
OUTPUT_ALLOWANCE = 1_000
#: A turn held by the daily budget is looked at again at least this often (seconds).
BUDGET_RECHECK = 600.0
#: The extraction prompt lists at most this many existing notes related to the turn
#: (found by recall over the turn's first RELATED_QUERY_CHARS characters), within
#: RELATED_TOKENS, besides the prompt block.
RELATED_NOTES = 25
RELATED_TOKENS = 2_000
RELATED_QUERY_CHARS = 2_000


#: The largest budget taken (a trillion tokens); a larger value is a mistake, not a budget.
MAX_BUDGET = 10**12


def budget_from_env(name: str) -> int | None:
    """A token budget from the environment (``MDMEM_DAILY_TOKENS``, ``MDMEM_TURN_TOKENS``).

    Unset, empty or ``0``: no budget. Digits, with ``_`` or ``,`` between them
    (``2_000_000``), or a plain ``2e6``. Anything else (``abc``, ``-5``,
    ``1e99``, ``inf``, ``²``) is refused with one warning line, and the
    default, no budget, is used: a typo never stops memory or crashes a command.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    digits = raw.replace("_", "").replace(",", "")
    value: int | None = None
    if digits.isascii() and digits.isdigit():
        value = int(digits)
    elif digits.isascii() and re.fullmatch(r"\d+(\.\d+)?[eE]\d{1,2}", digits):
        value = int(float(digits))
    if value is None or value > MAX_BUDGET:
        log.warning(
            "%s=%r is not a number of tokens from 0 to %d; using no budget", name, raw, MAX_BUDGET
        )
        return None
    return value or None


def budgeted_call(
    provider: Provider,
    request: ExtractionRequest,
    ledger_root: str | StateDir,
    turn_id: str,
    clock: Callable[[], float] = time.time,
    *,
    workspace: str = "",
) -> object:
    """``provider.extract(request)``, its tokens recorded in ``ledger_root``'s usage ledger
    whatever the outcome: every model call (turns, ``consolidate``) counts against one budget."""
    before = getattr(provider, "last_usage", None)
    try:
        return provider.extract(request)
    finally:
        usage = getattr(provider, "last_usage", None)
        if usage is not None and usage is not before:  # never count a call twice
            ledger.record(
                ledger_root,
                "call",
                clock(),
                turn=turn_id,
                provider=provider.name,
                model=usage.model,
                workspace=workspace,
                **{
                    "in": usage.input_tokens,
                    "out": usage.output_tokens,
                    "cr": usage.cache_read_tokens,
                    "cw": usage.cache_write_tokens,
                },
            )


def tokens_needed(request: ExtractionRequest) -> int:
    """What a call with ``request`` is expected to cost: its prompt and an answer's allowance."""
    return turn_.estimate_tokens(request.full_system + request.prompt) + OUTPUT_ALLOWANCE


class _Held(Exception):
    """The daily budget keeps this turn waiting, until ``retry_in`` seconds from now at most."""

    def __init__(self, retry_in: float) -> None:
        super().__init__(retry_in)
        self.retry_in = retry_in


@dataclass(frozen=True)
class TurnResult:
    """What became of one turn."""

    turn_id: str
    project: ApplyResult = field(default_factory=ApplyResult)
    user: ApplyResult = field(default_factory=ApplyResult)
    rejected: tuple[Rejected, ...] = ()
    """Operations dropped before reaching a store (no level, not an object, over the cap)."""
    provider: str = ""
    skipped: bool = False
    """Nothing in the turn was worth a model call; none was made."""
    held: bool = False
    """The daily token budget keeps the turn waiting in the journal; it is processed later."""
    proposals: tuple[str, ...] = ()
    """Ids of the proposals this turn left for review (review mode)."""


class Manager:
    """Memory for one workspace: its project store, the user store, and a background worker.

    ``Manager(workspace=".", user_dir=None, provider=None)``. Without a
    provider, the environment chooses one (``MDMEM_PROVIDER``, else an API
    key, else the Claude Code login, else offline: see
    :func:`mdmem.extract.providers.choose`).
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] = ".",
        user_dir: str | os.PathLike[str] | None = None,
        provider: Provider | None = None,
        *,
        include_tools: bool = False,
        redact_patterns: Iterable[str] = (),
        drain_timeout: float = 5.0,
        turn_lock_timeout: float = 600.0,
        max_attempts: int = 3,
        retry_delay: float = 30.0,
        resume: bool = True,
        discover: bool = True,
        daily_tokens: int | None = None,
        turn_tokens: int | None = None,
        clock: Callable[[], float] | None = None,
        review: str | None = None,
    ) -> None:
        user_path = os.path.abspath(os.fspath(user_dir)) if user_dir is not None else user_root()
        self.workspace = (
            discover_workspace(os.fspath(workspace), user_store=user_path)
            if discover
            else os.path.abspath(os.fspath(workspace))
        )
        self._redactor = Redactor([*extra_patterns_from_env(), *redact_patterns])
        install_log_filter()
        # A workspace whose project store would be the user store (the home
        # directory) or a committed symlink has none: ``project.unavailable`` says why.
        self.project = Store(
            project_root(self.workspace),
            Level.PROJECT,
            redact=self._redactor.redact,
            user_store=user_path,
        )
        self.user = Store(user_path, Level.USER, redact=self._redactor.redact)
        self._provider = provider
        # Which levels' operations become proposals (see mdmem.manager.review).
        self.review = review_.levels(self.workspace, review)
        self.limits = turn_.TurnLimits(include_tools=include_tools)
        self.drain_timeout = drain_timeout
        self.turn_lock_timeout = turn_lock_timeout
        self.max_attempts = max_attempts
        self.retry_delay = retry_delay
        # Budgets in tokens (None: none); the clock says what day it is (settable in tests).
        self.daily_tokens = (
            daily_tokens if daily_tokens is not None else budget_from_env("MDMEM_DAILY_TOKENS")
        )
        self.turn_tokens = (
            turn_tokens if turn_tokens is not None else budget_from_env("MDMEM_TURN_TOKENS")
        )
        self.clock: Callable[[], float] = clock or time.time
        self._journal = Journal(self.project.state.turns)
        self._cond = threading.Condition()
        self._queue: deque[tuple[str, Future[TurnResult] | None]] = deque()
        self._retry_at: dict[str, float] = {}
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._index = ""
        # Turns that could not be journaled (a read-only disk): kept while we live.
        self._memory_turns: dict[str, Turn] = {}
        # The worker's latest record of the turn it is on: what a failure is added to.
        self._current: Turn | None = None
        # The model's tokens per turn id, for the session's activity log (see _apply).
        self._turn_tokens: dict[str, tuple[int, int]] = {}
        self.refresh_index()
        atexit.register(_drain_at_exit, weakref.ref(self))
        if resume and os.path.isdir(self._journal.root):
            self._resume()

    def __repr__(self) -> str:
        return f"Manager(workspace={self.workspace!r})"

    # -- the prompt block ----------------------------------------------------------

    @property
    def index(self) -> str:
        """The merged prompt block (project, then user), trimmed to 200 lines and 25,600 bytes."""
        with self._cond:
            return self._index

    def refresh_index(self) -> str:
        """Recompute the prompt block from both stores, and return it.

        Through the block cache ``mdmem index`` uses (the same block): when
        neither store changed since it was last computed, this is a few
        ``lstat`` calls; when it was recomputed, the next session start reads it.
        """
        return self._set_index(cached_block(self.project, self.user))

    def _set_index(self, block: str) -> str:
        with self._cond:
            self._index = block
        return block

    # -- recall --------------------------------------------------------------------

    def recall(self, query: str, budget_tokens: int = 1200, limit: int | None = None) -> list[Hit]:
        """The notes of both stores that best answer ``query``, best first, within the budget.

        The hits are those :meth:`recall_block` shows for ``budget_tokens``;
        ``limit`` caps their number. Superseded and expired notes are left out.
        """
        from mdmem.recall import recall

        return recall([self.project, self.user], query, budget_tokens, limit)

    def recall_block(self, query: str, budget_tokens: int = 1200) -> str:
        """The Markdown block of the notes recalled for ``query``: whole lines, within the budget.

        Its last line says how many more notes matched, when some did not fit;
        ``""`` when nothing matched.
        """
        from mdmem.recall import recall_block

        return recall_block([self.project, self.user], query, budget_tokens)

    @property
    def provider(self) -> Provider:
        """The model provider (chosen on first use when none was given)."""
        if self._provider is None:
            from mdmem.extract.providers import default_provider

            self._provider = default_provider()
        return self._provider

    # -- accepting turns -------------------------------------------------------------

    def update_async(
        self,
        messages: Iterable[object],
        *,
        session: str | None = None,
        session_id: str | None = None,
    ) -> Future[TurnResult]:
        """Queue one completed turn for extraction; returns at once with a future.

        The turn (roles and text, redacted) is on disk before this returns.
        Call it only for a top-level agent turn that completed normally.
        ``session_id`` (or its older name ``session``: the agent's session id,
        when known) goes into the provenance of the notes the turn writes, and
        the turn into that session's record (``mdmem timeline``): the files its
        tool calls changed, the commands it ran, the person's asks.

        It never raises into the agent: a turn it cannot take fails the
        future instead (``TypeError``: a message has no role; ``MdmemError``:
        the manager is closed; anything else the turn's text provoked).
        """
        session = session_id or session
        messages = self._record_session(messages, session)
        future: Future[TurnResult] = Future()
        try:
            record = self._record(messages, session)
            if record is None:  # no text at all (tool churn only): nothing to send, counted
                ledger.record(self.user.state, "skip", self.clock(), turn=None)
                future.set_result(TurnResult(new_turn_id(), skipped=True))
                return future
            with self._cond:
                if self._closed:
                    raise MdmemError("this Manager is closed")
        except Exception as exc:  # the agent's turn must go on whatever the memory's trouble
            log.warning("turn not taken: %s", exc)
            future.set_exception(exc)
            return future
        turn_id = record.id
        try:
            self._open_journal()
            # Not fsynced here, to return at once: a renamed file survives any exit
            # or kill of this process; the worker fsyncs it before anything else.
            self._journal.add(record.format(), durable=False)
        except (OSError, ValueError) as exc:
            # Not durable, but not lost either while this process lives.
            log.warning("cannot write the turn journal (%s); keeping the turn in memory", exc)
            self._memory_turns[turn_id] = record
        with self._cond:
            self._queue.append((turn_id, future))
            self._start_worker()
            self._cond.notify_all()
        return future

    def _record_session(self, messages: Iterable[object], session: str | None) -> Iterable[object]:
        """Add the turn to its session's record (``mdmem timeline``); the messages, to read again.

        Never raises: a turn whose record fails is still taken.
        """
        if not session:
            return messages
        from mdmem.manager import sessions

        try:
            messages = list(messages)  # read twice: the record, then the journal
        except TypeError:
            return messages  # _record says what is wrong with them
        sessions.record(
            self.project,
            session,
            messages,
            workspace=self.workspace,
            agent="manager",
            redactor=self._redactor,
        )
        return messages

    def defer(self, messages: Iterable[object], *, session: str | None = None) -> str | None:
        """Journal a turn for another process to extract (as a hook does); return its id.

        Nothing is processed here: the turn waits, on disk, until a Manager
        starts in this workspace (``mdmem worker``). None for a turn with no text.

        Raises:
            TypeError: a message has no role.
            OSError: the journal cannot be written.
        """
        record = self._record(messages, session)
        if record is None:
            return None
        self.project.state.ensure()
        put_pending(self._journal.root, record.format())
        return record.id

    def _record(self, messages: Iterable[object], session: str | None = None) -> Turn | None:
        """The journal record of a turn: roles and redacted text; None when there is no text."""
        # Redacted whole inside from_messages, then cut: a secret across a cut is gone too.
        texts = turn_.from_messages(messages, self.limits, redactor=self._redactor)
        texts = [m for m in texts if m.text.strip()]
        if not texts:
            return None
        return Turn(
            id=new_turn_id(),
            accepted=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            workspace=self.workspace,
            messages=tuple((m.role, m.text) for m in texts),
            session=turn_.scrub(str(session)[:200]) if session else "",
        )

    def redact(self, text: str) -> str:
        """``text`` through this Manager's privacy filter (its extra patterns included)."""
        return self._redactor.redact(text)

    def summarise_sessions(self, limit: int = 3) -> list[str]:
        """Have the model summarise recently ended sessions that have no summary yet.

        Within the token budgets; nothing without a model (the offline provider).
        Returns the session ids summarised (see :func:`mdmem.manager.sessions.summarise`).
        """
        from mdmem.manager import sessions

        return sessions.summarise(self, self._call, limit, output_allowance=OUTPUT_ALLOWANCE)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn has been processed; False if ``timeout`` ran out first.

        A turn whose model call failed counts as processed: it stays in the
        journal, on disk, and is tried again later.
        """
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Flush, stop the worker and release the journal; False if turns were left for later."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=0 if not done else None)
        if thread is None or not thread.is_alive():
            self._journal.close()
            closer = getattr(self._provider, "close", None)
            if callable(closer):
                closer()
        return done

    def __enter__(self) -> Manager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(timeout=self.drain_timeout if exc_type is not None else None)

    # -- the worker --------------------------------------------------------------------

    def _open_journal(self) -> None:
        self.project.state.ensure()
        self._journal.open()

    def _resume(self) -> None:
        try:
            self._open_journal()
            adopted = self._journal.adopt()
        except OSError as exc:
            log.warning("cannot read the turn journal: %s", exc)
            return
        if adopted:
            log.info("resuming %d pending turn(s) in %s", len(adopted), self.workspace)
            with self._cond:
                self._queue.extend((turn_id, None) for turn_id in adopted)
                self._start_worker()
                self._cond.notify_all()

    def _start_worker(self) -> None:
        # Called with self._cond held.
        if self._thread is None or not self._thread.is_alive():
            # The worker may first write during the exit drain, when some imports fail.
            prepare_writes()

            self._thread = threading.Thread(target=self._run, name="mdmem-worker", daemon=True)
            self._thread.start()

    def _next(self) -> tuple[str, Future[TurnResult] | None] | None:
        with self._cond:
            while True:
                now = time.monotonic()
                for turn_id, due in sorted(self._retry_at.items(), key=lambda kv: kv[1]):
                    if due <= now:
                        del self._retry_at[turn_id]
                        self._queue.append((turn_id, None))
                if self._queue:
                    self._busy = True
                    return self._queue.popleft()
                if self._closed:
                    return None
                wait = min(self._retry_at.values(), default=now + 3600) - now
                self._cond.wait(timeout=max(wait, 0.01))

    def _run(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            turn_id, future = item
            try:
                result = self._process(turn_id)
            except BaseException as exc:
                log.warning("memory update of turn %s failed: %s", turn_id, exc)
                if future is not None and not future.done():
                    future.set_exception(exc)
            else:
                if future is not None and not future.done():
                    future.set_result(result)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _load(self, turn_id: str) -> Turn:
        if turn_id in self._memory_turns:
            return self._memory_turns[turn_id]
        return Turn.parse(self._journal.load(turn_id))

    def _save(self, turn: Turn) -> Turn:
        """Record progress on the turn (the answer, the stores done); return it."""
        # Not fsynced: it survives a kill, and after a power cut the turn, synced
        # before the model call, is redone; creating a note that is already there
        # is a no-op.
        self._current = turn
        if turn.id in self._memory_turns:
            self._memory_turns[turn.id] = turn
        else:
            self._journal.save(turn.format(), durable=False)
        return turn

    def _process(self, turn_id: str) -> TurnResult:
        if turn_id not in self._memory_turns:
            self._journal.sync(turn_id)
        try:
            turn = self._load(turn_id)
        except (OSError, ValueError, RecursionError) as exc:
            self._damaged(turn_id, exc)
        self._current = turn
        try:
            with (
                self._project_turn_lock(),
                self.user.turn_lock(self.turn_lock_timeout),
            ):
                if turn.answer is None:
                    # Checked and redacted before it is journaled: a model can echo a secret.
                    turn = self._save(self._ask(turn))
                result = self._apply(turn)
        except _Held as held:
            with self._cond:  # nothing failed: the turn waits, on disk, for the budget
                self._retry_at[turn_id] = time.monotonic() + held.retry_in
            return TurnResult(turn_id, provider=self.provider.name, held=True)
        except Exception as exc:
            self._failed_attempt(self._current or turn, exc)
            raise
        finally:
            self._current = None
        self._memory_turns.pop(turn_id, None)
        self._journal.remove(turn_id)
        written = [a.filename for a in result.project.applied]
        if self._stale_due(written):
            self.refresh_stale()
        self.refresh_index()
        return result

    def _stale_due(self, written: Iterable[str]) -> bool:
        """Whether the staleness marks need a check after a turn that wrote ``written``.

        A check reads the whole store, so it runs when it can change
        something: the code moved (HEAD, the git index) since the last check,
        or the turn rewrote a note that is marked. A note the turn just
        created is checked with the next code change (it was written from
        this code).
        """
        from mdmem.store.marks import tree_key

        if self.project.unavailable is not None:
            return False
        path = self.project.state.stale_marks
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read(1 << 20).splitlines()
        except (OSError, UnicodeDecodeError):
            return True
        if not lines:
            return True
        key, _, workspace = lines[0].partition("\t")
        if workspace != self.workspace or key != tree_key(self.workspace):
            return True
        marked = {line.partition("\t")[0] for line in lines[1:]}
        return any(name in marked for name in written)

    def _project_turn_lock(self) -> AbstractContextManager[None]:
        # Without a project store there is nothing to serialise, and its state
        # folder may be the user store's own: taking both would wait on ourselves.
        if self.project.unavailable is not None:
            return nullcontext()
        return self.project.turn_lock(self.turn_lock_timeout)

    def refresh_stale(self) -> None:
        """Check the project notes against the code (incremental, cached), for the prompt block.

        The worker calls it after each turn, so session start only reads the
        cache. Failures are logged, never raised: staleness is advice.
        """
        from mdmem.store.stale import check

        if self.project.unavailable is not None:
            return
        try:
            check(self.project, self.workspace)
        except (MdmemError, OSError) as exc:
            log.warning("staleness check of %s failed: %s", self.project.path, exc)

    def _ask(self, turn: Turn) -> Turn:
        """Call the provider (inside the turn locks); the turn with its answer, checked."""
        messages = [Message(r, t) for r, t in turn.messages]
        turn_id = turn.id
        if not turn_.worth_a_call(messages):
            ledger.record(self.user.state, "skip", self.clock(), turn=turn_id)
            return replace(turn, answer=Answer(), skipped=True)
        project_view, user_view = self._memory_view()
        shown = {n for view in (project_view, user_view) for n in _names(view)}
        request = prompt.build(
            messages,
            project_view,
            user_view,
            datetime.fromtimestamp(self.clock(), timezone.utc).date(),
            related=self._related(messages, shown),
        )
        provider = self.provider
        self._check_budget(request, turn, provider.name)
        try:
            items = parse_answer(self._call(provider, request, turn_id))
        except ProviderError as first:
            if first.raw is None:
                raise
            log.info("unreadable answer from %s; asking once more", provider.name)
            try:
                items = parse_answer(self._call(provider, request, turn_id))
            except ProviderError as second:
                raise ProviderError(
                    f"the model's answer could not be read twice: {second.reason}",
                    raw=second.raw,
                    retryable=False,
                ) from None
        return replace(turn, answer=sort_answer(items, self._redactor.redact))

    def _memory_view(self) -> tuple[str, str]:
        """The prompt block as sessions see it, split by store, each line dated.

        Bounded whatever the store holds (the block's 200 lines and 25,600
        bytes): the extraction prompt never lists every note.
        """
        sections: dict[str, list[str]] = {PROJECT_HEADING: [], USER_HEADING: []}
        current: list[str] | None = None
        for line in self.index.splitlines():
            if line in sections:
                current = sections[line]
            elif current is not None and line_filename(line):
                current.append(line)
        return (
            dated_index(self.project, "\n".join(sections[PROJECT_HEADING])),
            dated_index(self.user, "\n".join(sections[USER_HEADING])),
        )

    def _related(self, messages: list[Message], shown: set[str]) -> str:
        """The existing notes most related to this turn (recall over its text), as prompt lines.

        So the model can update or delete the note a turn is about, whatever
        the store holds. Notes the memory view already shows are not repeated.
        A failing search costs the list, never the turn.
        """
        query = " ".join(m.text for m in messages if m.role in ("user", "assistant"))
        query = query[:RELATED_QUERY_CHARS].strip()
        stores = [s for s in (self.project, self.user) if s.unavailable is None]
        if not query or not stores:
            return ""
        import sqlite3

        from mdmem.recall import recall

        try:
            # Lexical only: no embedding model in the worker's turn, a cost that does
            # not depend on what is installed; a turn shares the words of the note
            # it is about.
            # Without snippets: the lines below show none.
            hits = recall(
                stores,
                query,
                RELATED_TOKENS,
                RELATED_NOTES,
                semantic=False,
                exclude=shown,
                snippets=False,
            )
        except (MdmemError, OSError, sqlite3.Error) as exc:
            log.warning("cannot look up the notes related to this turn: %s", exc)
            return ""
        lines = []
        for hit in hits:
            level = hit.level.value if isinstance(hit.level, Level) else str(hit.level)
            about = f"{hit.title} — {hit.summary}" if hit.summary else hit.title
            when = f" [updated {hit.updated_date}]" if hit.updated_date else ""
            lines.append(f"- {level}: [{hit.type}] {about}{when} ({hit.filename})")
        return "\n".join(lines)

    def _check_budget(self, request: ExtractionRequest, turn: Turn, name: str) -> None:
        """Raise :class:`_Held` when the daily budget cannot take this turn today.

        Raises:
            ProviderError: the turn alone is larger than the per-turn cap (not retryable:
                it is set aside, whole, for a person to raise the cap).
        """
        if name == "offline" or (self.daily_tokens is None and self.turn_tokens is None):
            return
        need = tokens_needed(request)
        if self.turn_tokens is not None and need > self.turn_tokens:
            raise ProviderError(
                f"this turn needs about {need} tokens, more than MDMEM_TURN_TOKENS="
                f"{self.turn_tokens}; raise it, then `mdmem doctor --fix` processes the turn",
                retryable=False,
            )
        if self.daily_tokens is None:
            return
        now = self.clock()
        used = ledger.tokens_on(self.user.state, ledger.day_of(now))
        if used + need <= self.daily_tokens:
            return
        if turn.held != ledger.day_of(now):
            self._save(replace(turn, held=ledger.day_of(now)))
            ledger.record(self.user.state, "held", now, turn=turn.id)
        midnight = (int(now) // 86_400 + 1) * 86_400
        log.info(
            "turn %s waits for the daily budget (%d of %d tokens used today)",
            turn.id,
            used,
            self.daily_tokens,
        )
        raise _Held(min(max(midnight - now, 1.0), BUDGET_RECHECK))

    def _call(self, provider: Provider, request: ExtractionRequest, turn_id: str) -> object:
        """One provider call, its tokens recorded in the ledger whatever the outcome."""
        before = getattr(provider, "last_usage", None)
        try:
            return budgeted_call(
                provider, request, self.user.state, turn_id, self.clock, workspace=self.workspace
            )
        finally:
            usage = getattr(provider, "last_usage", None)
            if usage is not None and usage is not before:  # the session's activity log
                was = self._turn_tokens.pop(turn_id, (0, 0))
                if len(self._turn_tokens) > 100:
                    self._turn_tokens.clear()
                self._turn_tokens[turn_id] = (
                    was[0] + int(usage.input_tokens or 0),
                    was[1] + int(usage.output_tokens or 0),
                )

    def _apply(self, turn: Turn) -> TurnResult:
        answer = turn.answer
        assert answer is not None
        results: dict[str, ApplyResult] = {}
        proposals: list[str] = []
        turn, source, excerpt = self._source(turn)
        for store in (self.project, self.user):
            level = store.level.value
            if level in turn.applied:
                continue
            ops = answer.ops(level)
            invalid = tuple(Rejected(d.operation, d.reason) for d in answer.refused(level))
            if store.unavailable is not None:
                why = f"no project store in this workspace: {store.unavailable}"
                results[level] = ApplyResult((), tuple(Rejected(format_op(op), why) for op in ops))
            elif level in self.review:  # review mode: proposals instead of writes
                ids, results[level] = review_.propose(
                    store,
                    ops,
                    turn=source.turn,
                    source=source.line(),
                    excerpt=excerpt,
                    redact=self._redactor.redact,
                )
                proposals += ids
            else:
                results[level] = store.apply(ops, source="worker", provenance=source.line())
            if invalid:  # refused where the answer was read, as the store would have
                results[level] = ApplyResult(
                    results[level].applied, invalid + results[level].rejected
                )
            written = [
                a.filename for a in results[level].applied if a.action in ("create", "update")
            ]
            if written:
                ledger.record(store.state, "write", self.clock(), n=written, via="worker")
            turn = self._save(replace(turn, applied=(*turn.applied, level)))
        self._after_turn(turn, source, excerpt, results)
        self._log_activity(turn, results)
        return TurnResult(
            turn_id=turn.id,
            project=results.get("project", ApplyResult()),
            user=results.get("user", ApplyResult()),
            rejected=tuple(Rejected(d.operation, d.reason) for d in answer.rejected),
            provider=self.provider.name,
            skipped=turn.skipped,
            proposals=tuple(proposals),
        )

    def _source(self, turn: Turn) -> tuple[Turn, provenance.Source, str]:
        """The turn's provenance (fixed at its first application, so a replay writes the same),
        the turn that carries it, and the turn's excerpt."""
        source = turn.source
        if source is None:
            provider = self.provider
            model = str(getattr(provider, "model", "") or "")
            source = provenance.Source(
                turn=turn.id,
                at=provenance.now_stamp(),
                model=f"{provider.name}/{model}" if model else provider.name,
                git=provenance.git_head(self.workspace),
                session=turn.session,
            )
            turn = replace(turn, source=source)
            self._current = turn
        return turn, source, turn_.render(Message(r, t) for r, t in turn.messages)

    def _log_activity(self, turn: Turn, results: dict[str, ApplyResult]) -> None:
        """What the turn wrote, and its tokens, in the session's activity log (web page)."""
        from mdmem.store import activity

        written = [[level, a.action, a.filename] for level, r in results.items() for a in r.applied]
        spent = self._turn_tokens.pop(turn.id, (0, 0))
        if turn.session and self.project.unavailable is None and (written or any(spent)):
            activity.record(
                self.project.state,
                turn.session,
                "write",
                self.clock(),
                turn=turn.id,
                n=written,
                **{"in": spent[0], "out": spent[1]},
            )

    def _after_turn(
        self,
        turn: Turn,
        source: provenance.Source,
        excerpt: str,
        results: dict[str, ApplyResult],
    ) -> None:
        """Keep the turn's excerpt for ``mdmem why``, and let a correction count (never raises)."""
        written = {
            level: [(a.action, a.filename) for a in result.applied]
            for level, result in results.items()
        }
        answer = turn.answer or Answer()
        flagged = any(
            isinstance(op, (Create, Update)) and op.type is NoteType.CORRECTION_FEEDBACK
            for op in (*answer.project, *answer.user)
        )
        pairs = list(turn.messages)
        try:
            for store in (self.project, self.user):
                notes = written.get(store.level.value)
                if notes:
                    provenance.record_turn(
                        store.state, source, excerpt, notes, private=store.private
                    )
            if source.session:
                from mdmem.manager import sessions

                made = [
                    (level, name)
                    for level, done in written.items()
                    for action, name in done
                    if action in ("create", "update")
                ]
                sessions.note_written(self.project, source.session, made)
            feedback.after_turn(
                [s for s in (self.project, self.user) if s.unavailable is None],
                pairs,
                turn=source.turn,
                at=source.at,
                written=written,
                flagged=flagged,
            )
        except (MdmemError, OSError) as exc:
            log.warning("cannot record provenance or feedback of turn %s: %s", source.turn, exc)

    def _damaged(self, turn_id: str, exc: BaseException) -> NoReturn:
        """A claimed turn file that cannot be read: set it aside with one line, never retry it.

        Raises:
            StoreError: always, saying where the file went (the turn is not processed).
        """
        path = os.path.join(self._journal.mine, f"{turn_id}.json")
        if isinstance(exc, FileNotFoundError):
            raise StoreError(path, "gone from the turn journal") from None
        try:
            where = "set aside in " + self._journal.set_aside(turn_id)
        except OSError as io_error:
            where = f"left in place ({io_error.strerror})"
        reason = "not a turn record" if isinstance(exc, (ValueError, RecursionError)) else str(exc)
        raise StoreError(path, f"damaged ({reason}); {where}, never retried") from None

    def _failed_attempt(self, turn: Turn, exc: BaseException) -> None:
        attempts = turn.attempts + 1
        raw = exc.raw if isinstance(exc, ProviderError) else None
        failure = Failure(
            at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            error=self._redactor.redact(str(exc)),
            raw_answer=self._redactor.redact(str(raw)) if raw is not None else None,
        )
        turn = replace(turn, attempts=attempts, errors=(*turn.errors, failure))
        retryable = not (isinstance(exc, ProviderError) and not exc.retryable)
        turn_id = turn.id
        try:
            if retryable and attempts < self.max_attempts:
                self._save(turn)
                with self._cond:
                    self._retry_at[turn_id] = time.monotonic() + self.retry_delay * attempts
            else:
                self._memory_turns.pop(turn_id, None)
                where = self._journal.fail(turn.format())
                log.error("turn %s moved aside after %d attempt(s): %s", turn_id, attempts, where)
        except OSError as io_error:
            log.error("cannot record the failure of turn %s: %s", turn_id, io_error)


def _names(view: str) -> list[str]:
    return [n for n in map(line_filename, view.splitlines()) if n]


def _drain_at_exit(ref: weakref.ReferenceType[Manager]) -> None:
    """At interpreter exit, give queued turns a bounded time to reach disk."""
    manager = ref()
    if manager is not None and not manager._closed:
        manager.close(timeout=manager.drain_timeout)
