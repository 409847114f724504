"""The one intake: every source hands its events here, and nothing else stores events.

    sanitise → validate → dedup → envelope → durable commit → publish on the bus

Rejected input goes to the integration error log and a counter, never to the event log.
An event is *accepted* only once its transaction has committed (``synchronous=FULL``), so
whatever a caller was told is accepted survives a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

from mplp_lsp.engine.bus import EventBus
from mplp_lsp.protocol.envelope import FamilyForm, build_envelope
from mplp_lsp.protocol.json_input import lone_surrogate_at
from mplp_lsp.protocol.kinds import PAYLOAD_KINDS, Kind, kind_for_event_type
from mplp_lsp.protocol.result import ErrorCode, ValidationResult
from mplp_lsp.protocol.validator import EventValidator, default_validator
from mplp_lsp.sanitize.paths import PathRejected, relative_path
from mplp_lsp.sanitize.redact import (
    redact,
    redact_args,
    redact_name,
    redact_names,
    strip_url_credentials,
)
from mplp_lsp.store.dedup import event_key, id_key
from mplp_lsp.store.errorlog import IntegrationErrorLog
from mplp_lsp.store.events import EventLog, NewEvent, StoredEvent, encode_body
from mplp_lsp.store.writer import StoreWriter

log = logging.getLogger(__name__)

_EXCERPT_LIMIT = 2048
_SLICE = 128  # about 5 ms of validation: the longest the intake holds the event loop
_TEXT_FIELDS: dict[Kind, tuple[str, ...]] = {
    Kind.TOOL: ("output_summary",),
    Kind.FILE_UPDATE: ("change_summary",),
    Kind.GIT: ("commit_message", "author_name"),
}
# Branch names are names a user chose; a token (or `password=...`) in one must not travel.
_NAME_FIELDS: dict[Kind, tuple[str, ...]] = {Kind.GIT: ("ref_name",), Kind.CI: ("branch_name",)}
_URL_FIELDS: dict[Kind, tuple[str, ...]] = {Kind.GIT: ("repo_url",), Kind.CI: ("run_url",)}
_PATH_FIELDS: dict[Kind, tuple[str, ...]] = {
    Kind.FILE_UPDATE: ("file_path", "previous_path"),
    Kind.TOOL: ("working_directory",),
}


SubmissionObserver = Callable[[Sequence[StoredEvent]], None]
# Who wants to see what the current task submits (a plan run reporting its own events): a
# context variable, so submissions from other tasks (an editor's saves) are not reported.
_observer: contextvars.ContextVar[SubmissionObserver | None] = contextvars.ContextVar(
    "mplp_intake_observer", default=None
)


@contextlib.contextmanager
def observe_submissions(observer: SubmissionObserver) -> Iterator[None]:
    """Call ``observer`` with the events stored for what this task submits, as they commit."""
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class Submission:
    """One raw event from a source.

    ``data`` is a payload for the four integration kinds, a whole envelope for
    ``Kind.ENVELOPE``, or a whole observability event for the L3 families. ``trusted_paths``
    says the source already resolved its paths against the workspace (the editor adapter
    does, with symlink checks); anything else has its path fields checked here.
    """

    kind: Kind
    data: Any  # untrusted: anything a source received, checked here
    source_module: str
    source: str | None = None
    trusted_paths: bool = False


@dataclass(frozen=True, slots=True)
class IntakeResult:
    outcome: Outcome
    result: ValidationResult
    event: StoredEvent | None = None

    @property
    def accepted(self) -> bool:
        return self.outcome is Outcome.ACCEPTED


@dataclass
class IntakeCounters:
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class Intake:
    _validator: EventValidator  # set by submit_many once the validators are compiled

    def __init__(
        self,
        writer: StoreWriter,
        bus: EventBus,
        error_log: IntegrationErrorLog,
        *,
        root: Path,
        family: FamilyForm = FamilyForm.SPEC,
        validator: EventValidator | None = None,
        state_dir: Path | None = None,
    ) -> None:
        self._writer = writer
        self._bus = bus
        self._error_log = error_log
        self._root = root
        self._state_dir = _inside(root, state_dir)
        self.family = family
        # Compiled when the first activity is reported (prepare) or the first input arrives:
        # an idle daemon does not hold the schema engines and invariants in memory.
        self._given_validator = validator
        self._warming: asyncio.Future[EventValidator] | None = None
        self.counters = IntakeCounters()
        self._submitting = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._quiet_since = 0.0
        self._handing = asyncio.Lock()

    async def quiet(self, settle: float, limit: float) -> bool:
        """Return once no submission has been in progress for ``settle`` seconds (True), or
        after ``limit`` seconds at the latest (False).

        Derived work (PSG file nodes and what follows them) waits for this, so a burst of
        source events is accepted and made durable first and its consequences follow in a
        few large batches, instead of competing with the burst for the event loop and the
        writer. ``settle`` bridges the short gaps between a burst's debounced deliveries;
        ``limit`` keeps a steady stream of submissions from holding derived work back for good.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while (left := deadline - loop.time()) > 0:
            if not self._quiet.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._quiet.wait(), left)
                continue
            idle = loop.time() - self._quiet_since
            if idle >= settle:
                return True
            await asyncio.sleep(min(settle - idle, left))
        return False

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Submissions are in progress, or being made ready (a burst's batch read against
        the store and screened before it is submitted): :meth:`quiet` waits for the end."""
        self._submitting += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._submitting -= 1
            if not self._submitting:
                self._quiet_since = asyncio.get_running_loop().time()
                self._quiet.set()

    async def submit(self, submission: Submission) -> IntakeResult:
        [result] = await self.submit_many([submission])
        return result

    def prepare(self) -> None:
        """Activity was reported: compile the validators now, off the event loop, so they
        are ready when its events arrive (a quiet period later). Idempotent."""
        if self._warming is None:
            loop = asyncio.get_running_loop()
            self._warming = loop.run_in_executor(None, self._compiled_validator)

    def _compiled_validator(self) -> EventValidator:
        return self._given_validator or default_validator()

    async def submit_many(self, submissions: Sequence[Submission]) -> list[IntakeResult]:
        """Check, commit and publish; a big batch goes in slices so the event loop stays live."""
        # Slice k+1 is checked while slice k commits; group commit merges what queues up.
        with self.busy():
            self.prepare()
            assert self._warming is not None
            self._validator = await self._warming
            stores = []
            # Calls hand their slices to the writer in call order, whole: a caller may submit
            # its next batch before the last one is stored (file activity keeps a few in
            # flight) and the store still holds them in order.
            async with self._handing:
                for start in range(0, len(submissions), _SLICE):
                    checked = self._check_slice(submissions[start : start + _SLICE])
                    stores.append(asyncio.ensure_future(self._store_slice(*checked)))
                    await asyncio.sleep(0)
            results = [result for store in stores for result in await store]
        observer = _observer.get()
        if observer is not None:
            observer([result.event for result in results if result.event is not None])
        return results

    def _check_slice(self, submissions: Sequence[Submission]) -> _Checked:
        results: list[IntakeResult | None] = []
        pending: list[tuple[int, NewEvent]] = []
        rejected: list[tuple[Submission, ValidationResult]] = []
        plain = _plain_names(submissions)
        for submission in submissions:
            prepared = self._prepare(submission, plain)
            if isinstance(prepared, ValidationResult):
                rejected.append((submission, prepared))
                results.append(IntakeResult(Outcome.REJECTED, prepared))
            else:
                pending.append((len(results), prepared))
                results.append(None)
        return results, pending, rejected

    async def _store_slice(
        self,
        results: list[IntakeResult | None],
        pending: list[tuple[int, NewEvent]],
        rejected: list[tuple[Submission, ValidationResult]],
    ) -> list[IntakeResult]:
        """Commit a checked slice in one transaction, then publish what was stored."""
        # Append first: slices must reach the store in order; the error log can wait.
        if pending:
            stored = await self._writer.append([event for _, event in pending])
            for (index, _), event in zip(pending, stored, strict=True):
                results[index] = self._count(event)
            self._bus.publish([event for event in stored if event is not None])
        if rejected:
            await self._record_rejections(rejected)
        return [result for result in results if result is not None]

    async def reject(self, submission: Submission, result: ValidationResult) -> IntakeResult:
        """Record input a front end refused before it could become an event."""
        await self._record_rejections([(submission, result)])
        return IntakeResult(Outcome.REJECTED, result)

    def _count(self, event: StoredEvent | None) -> IntakeResult:
        if event is None:
            self.counters.duplicates += 1
            return IntakeResult(Outcome.DUPLICATE, ValidationResult.success())
        self.counters.accepted += 1
        self.counters.by_kind[event.kind] = self.counters.by_kind.get(event.kind, 0) + 1
        return IntakeResult(Outcome.ACCEPTED, ValidationResult.success(), event)

    def _prepare(
        self, submission: Submission, plain: frozenset[str] = frozenset()
    ) -> NewEvent | ValidationResult:
        """``plain``: paths known to hold no credential (:func:`_plain_names`)."""
        kind = submission.kind
        if not isinstance(submission.data, Mapping):
            return self._validator.validate(kind, submission.data)
        data = dict(submission.data)
        try:
            if kind in PAYLOAD_KINDS:
                data = self._sanitise_payload(kind, data, submission.trusted_paths, plain)
            elif kind is Kind.ENVELOPE and isinstance(data.get("payload"), Mapping):
                payload_kind = _payload_kind(data)
                if payload_kind is not None:
                    data["payload"] = self._sanitise_payload(
                        payload_kind, dict(data["payload"]), submission.trusted_paths, plain
                    )
        except _FieldRejected as rejection:
            return rejection.result
        result = self._validator.validate(kind, data)
        if not result.ok:
            return result
        try:
            return self._new_event(kind, data, submission)
        except _FieldRejected as rejection:
            return rejection.result

    def _new_event(self, kind: Kind, data: dict[str, Any], submission: Submission) -> NewEvent:
        if kind in PAYLOAD_KINDS:
            envelope = build_envelope(
                kind,
                data,
                source_module=submission.source_module,
                source=submission.source,
                family=self.family,
            )
            return NewEvent(
                event_id=envelope["event_id"],
                kind=kind.value,
                dedup_key=event_key(kind.value, data),
                timestamp=envelope["timestamp"],
                envelope=envelope,
                minted=True,
                body=_stored_body(envelope),
            )
        if kind is Kind.ENVELOPE:
            payload_kind = _payload_kind(data)
            assert payload_kind is not None  # the schema checked event_type
            return NewEvent(
                event_id=data["event_id"],
                kind=payload_kind.value,
                dedup_key=event_key(payload_kind.value, data["payload"]),
                timestamp=data["timestamp"],
                envelope=data,
                body=_stored_body(data),
            )
        # An L3 observability event is its own envelope; its id makes it unique.
        return NewEvent(
            event_id=data["event_id"],
            kind=kind.value,
            dedup_key=id_key(data["event_id"], data["timestamp"]),
            timestamp=data["timestamp"],
            envelope=data,
            body=_stored_body(data),
        )

    def _sanitise_payload(
        self, kind: Kind, data: dict[str, Any], trusted: bool, plain: frozenset[str]
    ) -> dict[str, Any]:
        for name in _TEXT_FIELDS.get(kind, ()):
            if isinstance(data.get(name), str):
                data[name] = redact(data[name])
        for name in _NAME_FIELDS.get(kind, ()):
            if isinstance(data.get(name), str):
                data[name] = redact_name(data[name])
        for name in _URL_FIELDS.get(kind, ()):
            if isinstance(data.get(name), str):
                data[name] = strip_url_credentials(data[name])
        args = data.get("args")
        if kind is Kind.TOOL and isinstance(args, list) and all(isinstance(a, str) for a in args):
            data["args"] = redact_args(args, program=_program(data))
        for name in _PATH_FIELDS.get(kind, ()):
            if isinstance(data.get(name), str):
                if not trusted:
                    data[name] = self._workspace_path(name, data[name])
                _refuse_reserved_path(name, data[name], self._state_dir)
                if data[name] not in plain:
                    _refuse_secret_path(name, data[name])
        return data

    def _workspace_path(self, name: str, value: str) -> str:
        if value == ".":
            return value
        try:
            _, relative = relative_path(value, (self._root,))
        except PathRejected as rejected:
            raise _FieldRejected(rejected.to_result(name)) from None
        return relative

    @property
    def writer(self) -> StoreWriter:
        """The store this intake writes to (the owner's writer)."""
        return self._writer

    async def _record_rejections(self, rejected: list[tuple[Submission, ValidationResult]]) -> None:
        self.counters.rejected += len(rejected)
        for submission, result in rejected:
            self._error_log.write(
                {
                    "source_module": submission.source_module,
                    "kind": submission.kind.value,
                    "errors": [issue.to_dict() for issue in result.errors],
                    "input_excerpt": _excerpt(submission.data),
                }
            )
        try:
            await self._writer.run(lambda conn: EventLog(conn).bump("rejected", len(rejected)))
        except Exception:
            log.exception("could not count %d rejected events in the store", len(rejected))


_Checked = tuple[
    list["IntakeResult | None"],
    list[tuple[int, NewEvent]],
    list[tuple[Submission, ValidationResult]],
]


class _FieldRejected(Exception):
    def __init__(self, result: ValidationResult) -> None:
        super().__init__(result.errors[0].message)
        self.result = result


def _stored_body(envelope: Mapping[str, Any]) -> str:
    """The envelope as the store writes it, encoded here: text with a lone surrogate (a JSON
    "\\ud800" escape, a name whose bytes are not UTF-8) has no UTF-8 form, and in the store
    it would fail the whole transaction, other callers' events with it."""
    try:
        return encode_body(envelope)
    except ValueError:
        where = lone_surrogate_at(envelope)
        if where is None:
            raise
        message = "the text holds a lone surrogate (it has no UTF-8 form)"
        raise _FieldRejected(
            ValidationResult.single(where, ErrorCode.TEXT_NOT_UNICODE, message)
        ) from None


def _payload_kind(envelope: Mapping[str, Any]) -> Kind | None:
    return kind_for_event_type(envelope.get("event_type"))


def _inside(root: Path, state_dir: Path | None) -> PurePosixPath | None:
    """The state dir relative to the workspace root, when it lies inside it."""
    if state_dir is None:
        return None
    try:
        return PurePosixPath(state_dir.resolve().relative_to(root.resolve()).as_posix())
    except (OSError, ValueError):
        return None


def _refuse_reserved_path(name: str, value: str, state_dir: PurePosixPath | None) -> None:
    """The repository's own files (``.git/`` at any depth: config, hooks, refs) and the
    daemon's state dir are never workspace files: no events, no graph nodes."""
    if ".git" not in value.casefold() and (state_dir is None or not state_dir.parts):
        return  # the common case, without splitting the path
    path = PurePosixPath(value)
    if any(part.casefold() == ".git" for part in path.parts):
        reason = "it is inside .git, the repository's own files"
    elif (
        state_dir is not None
        and state_dir.parts
        and path.parts[: len(state_dir.parts)] == (state_dir.parts)
    ):
        reason = "it is inside the daemon's state dir"
    else:
        return
    raise _FieldRejected(
        ValidationResult.single(name, ErrorCode.PATH_RESERVED, f"{reason}; not recorded")
    )


def _plain_names(submissions: Sequence[Submission]) -> frozenset[str]:
    """The path values of a slice that hold no credential, judged in one pass over them all
    (:func:`redact_names`: one call per path was a third of a 20,000-path burst's intake).
    A path the intake rewrites first (one not yet workspace-relative) is judged on its own."""
    names = [
        value
        for submission in submissions
        if isinstance(submission.data, Mapping)
        for data in (submission.data, submission.data.get("payload"))
        if isinstance(data, Mapping)
        for field_names in _PATH_FIELDS.values()
        for name in field_names
        if isinstance(value := data.get(name), str)
    ]
    return frozenset(
        name for name, redacted in zip(names, redact_names(names), strict=True) if name == redacted
    )


def _refuse_secret_path(name: str, value: str) -> None:
    """A path is an identity, so it cannot be redacted; a path holding a credential is refused."""
    if redact_name(value) != value:
        raise _FieldRejected(
            ValidationResult.single(
                name,
                ErrorCode.PATH_SECRET,
                "the path holds what looks like a credential; the change is not recorded",
            )
        )


_TOOL_VERSION = re.compile(r"-[0-9][\w.+\-]*$")  # cargo-1.75.0: the id tool_run gives


def _program(data: Mapping[str, Any]) -> str | None:
    """The program a tool event's arguments were given to, as far as its id tells."""
    tool = data.get("tool_id")
    return _TOOL_VERSION.sub("", tool) if isinstance(tool, str) else None


def _excerpt(data: Any) -> str:
    """What the error log keeps of rejected input: redacted and bounded."""
    args = data.get("args") if isinstance(data, Mapping) else None
    if isinstance(args, list) and all(isinstance(arg, str) for arg in args):
        data = {
            **data,
            "args": redact_args(args, program=_program(data)),
        }  # a value after --token looks like anything
    try:
        text = json.dumps(data, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(data)
    return redact(text[: _EXCERPT_LIMIT * 2])[:_EXCERPT_LIMIT]
