"""From ref updates to git_event payloads: the rules shared by the poller and the hooks.

Both the poller (which diffs two ref snapshots) and the ``reference-transaction`` hook (which
git hands each ref update) describe what happened as :class:`RefUpdate` values and call
:func:`git_events`. The payload is a function of the repository alone — the commit's own
timestamp, the full ref name, the same enrichment — so when both report one operation the
intake sees the same payload twice and keeps one.

Rules, per update (``C`` = commits reachable from the new value and from no ref known before):

* ``refs/heads/*`` created: ``branch_create``; if the reflog says ``commit`` (the first commit
  of a branch), also its commits ``C``.
* ``refs/heads/*`` moved: one ``commit`` (or ``merge``, for two or more parents) per commit in
  ``C``, oldest first; a fast-forward merge is one ``merge`` of the new tip (after ``C``,
  which is empty unless the merged branch was never seen: gone before a poll); a pull
  (``git pull``, ``git pull --rebase``: the reflog says ``pull``) is a ``merge`` of the new
  tip after the commits it brought or replayed.
* ``refs/heads/*`` deleted: ``branch_delete`` of the commit it pointed to.
* ``refs/tags/*`` created or moved: ``tag`` of the tagged commit (read by object id: tags of
  trees or blobs are no event).
* ``refs/remotes/*`` moved by ``update by push``: ``push``.
* a detached ``HEAD`` moved by ``commit``: its commits, with ``ref_name`` ``HEAD``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from mplp_lsp.config.settings import EmailPolicy
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.vcs.objects import tag_infos
from mplp_lsp.vcs.refs import HEAD, ZERO
from mplp_lsp.vcs.repo import GitRepo

log = logging.getLogger(__name__)

EventKind = Literal["commit", "push", "merge", "tag", "branch_create", "branch_delete"]
MessageLookup = Callable[[str, str], str | None]  # (ref, new value) -> its reflog message

_HASHED_DOMAIN = "hashed.invalid"
PULL_MESSAGES = ("pull:", "pull ")
MERGE_MESSAGES = ("merge ", "merge:", *PULL_MESSAGES)


@dataclass(frozen=True, slots=True)
class RefUpdate:
    ref: str
    old: str  # ZERO: created
    new: str  # ZERO: deleted


@dataclass(frozen=True, slots=True)
class Planned:
    kind: EventKind | None  # None: commit or merge, decided by the parent count
    ref: str
    object_id: str


@dataclass(frozen=True, slots=True)
class CommitInfo:
    commit_id: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    committed_at: int
    subject: str
    files_changed: int
    insertions: int
    deletions: int


def plan(
    repo: GitRepo, updates: Sequence[RefUpdate], known: set[str], message: MessageLookup
) -> list[Planned]:
    """What ``updates`` mean, in order. ``known`` (tips before them) grows as they apply.

    A detached ``HEAD`` counts only where it committed: the commits a rebase replays on a
    detached ``HEAD`` are the rebased branch's, reported when the branch moves to them."""
    planned: list[Planned] = []
    for update in updates:
        created, deleted = update.old == ZERO, update.new == ZERO
        if update.ref == HEAD:
            if not deleted and _starts(message(HEAD, update.new), ("commit",)):
                planned += _commits(repo, update, known)
                known.add(update.new)
            continue
        if update.ref.startswith("refs/heads/"):
            if deleted:
                if not created:
                    planned.append(Planned("branch_delete", update.ref, update.old))
            elif created:
                planned.append(Planned("branch_create", update.ref, update.new))
                if _starts(message(update.ref, update.new), ("commit",)):
                    planned += _commits(repo, update, known)
            else:
                commits = _commits(repo, update, known)
                planned += commits
                moved_by = message(update.ref, update.new)
                merged = not commits or _fast_forward(moved_by) or _starts(moved_by, PULL_MESSAGES)
                if _starts(moved_by, MERGE_MESSAGES) and merged:
                    planned.append(Planned("merge", update.ref, update.new))
        elif update.ref.startswith("refs/tags/"):
            if not deleted:
                planned.append(Planned("tag", update.ref, update.new))
        elif (
            update.ref.startswith("refs/remotes/")
            and not deleted
            and _starts(message(update.ref, update.new), ("update by push",))
        ):
            planned.append(Planned("push", update.ref, update.new))
        if not deleted:
            known.add(update.new)
    return planned


def _fast_forward(message: str | None) -> bool:
    # "merge topic: Fast-forward", "pull: Fast-forward": a merge even when the commits it
    # brought are new to the one reporting it (a poller that never saw the merged branch).
    return message is not None and message.endswith("Fast-forward")


def _starts(message: str | None, prefixes: tuple[str, ...]) -> bool:
    return message is not None and message.startswith(prefixes)


def _commits(repo: GitRepo, update: RefUpdate, known: set[str]) -> list[Planned]:
    """The commits of ``update.new`` no known tip reaches, parents first. The tips go in on
    standard input: a repository with thousands of refs has thousands of them."""
    exclude = known | ({update.old} if update.old != ZERO else set())
    revs = "\n".join([update.new, *(f"^{oid}" for oid in sorted(exclude))]) + "\n"
    try:
        out = repo.run_fed(
            "rev-list", "--topo-order", "--reverse", "--ignore-missing", "--stdin", stdin=revs
        )
    except Exception as error:  # one update git cannot walk does not stop the others
        log.warning("git: the commits of %s cannot be listed: %s", update.new, error)
        return []
    return [Planned(None, update.ref, oid) for oid in out.split()]


def commit_infos(repo: GitRepo, commit_ids: Iterable[str]) -> dict[str, CommitInfo]:
    """Metadata and diff stats (against the first parent) of many commits in one git call:
    never a process per commit. The ids go in on stdin."""
    wanted = list(dict.fromkeys(commit_ids))
    if not wanted:
        return {}
    out = repo.run_fed(
        "log",
        "--no-walk=unsorted",
        "--numstat",
        "-z",
        "--diff-merges=first-parent",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--ignore-missing",
        "--format=%x1e%H%x00%P%x00%an%x00%ae%x00%ct%x00%B%x00",
        "--stdin",
        stdin="\n".join(wanted) + "\n",
    )
    infos: dict[str, CommitInfo] = {}
    for record in out.split("\x1e")[1:]:
        info = _parse_record(record)
        infos[info.commit_id] = info
    return infos


def _parse_record(record: str) -> CommitInfo:
    commit_id, parents, name, email, committed, body, stats = record.split("\0", 6)
    files = insertions = deletions = 0
    for entry in stats.split("\0"):
        fields = entry.strip("\n").split("\t")
        if len(fields) != 3:
            continue
        files += 1
        insertions += int(fields[0]) if fields[0].isdigit() else 0  # "-": a binary file
        deletions += int(fields[1]) if fields[1].isdigit() else 0
    return CommitInfo(
        commit_id=commit_id,
        parents=tuple(parents.split()),
        author_name=name,
        author_email=email,
        committed_at=int(committed),
        subject=body.strip().split("\n", 1)[0].strip() if body.strip() else "",
        files_changed=files,
        insertions=insertions,
        deletions=deletions,
    )


def git_events(
    repo: GitRepo,
    updates: Sequence[RefUpdate],
    known: set[str],
    message: MessageLookup,
    *,
    email_policy: EmailPolicy = "hash",
    repo_url: str | None = None,
) -> list[dict[str, Any]]:
    """The git_event payloads for ``updates``, oldest first."""
    planned = plan(repo, updates, known, message)
    if not planned:
        return []
    tags = tag_infos(repo, [p.object_id for p in planned if p.kind == "tag"])
    commit_of = {
        p: tags[p.object_id].commit_id if p.kind == "tag" and p.object_id in tags else p.object_id
        for p in planned
    }
    infos = commit_infos(repo, commit_of.values())
    url = repo_url if repo_url is not None else repo.repo_url()
    payloads = []
    reported = set()
    for item in planned:
        info = infos.get(commit_of[item])
        if info is None or (item.kind == "tag" and item.object_id not in tags):
            continue  # the object is gone (pruned), or a tag of no commit
        kind: EventKind = item.kind or ("merge" if len(info.parents) > 1 else "commit")
        if (kind, item.ref, info.commit_id) in reported:
            continue  # a pull's merge commit, planned as a commit and as the pull
        reported.add((kind, item.ref, info.commit_id))
        moment = info.committed_at
        if item.kind == "tag":
            moment = tags[item.object_id].tagged_at or moment
        payload: dict[str, Any] = {
            "repo_url": url,
            "commit_id": info.commit_id,
            "ref_name": item.ref,
            "event_kind": kind,
            "timestamp": utc_timestamp(datetime.fromtimestamp(moment, UTC)),
        }
        if kind in ("commit", "merge"):
            payload.update(_enrichment(info, email_policy))
        payloads.append(payload)
    return payloads


def _enrichment(info: CommitInfo, email_policy: EmailPolicy) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "author_name": info.author_name,
        "commit_message": info.subject,
        "files_changed": info.files_changed,
        "insertions": info.insertions,
        "deletions": info.deletions,
        "parent_commits": list(info.parents),
    }
    email = author_email(info.author_email, email_policy)
    if email is not None:
        extra["author_email"] = email
    return extra


def author_email(email: str, policy: EmailPolicy) -> str | None:
    """The address as the policy allows it. ``hash`` keeps it an address (the schema wants
    one) whose local part is a digest: the same author always maps to the same value."""
    email = email.strip()
    if policy == "drop" or not email:
        return None
    if policy == "keep":
        return email
    digest = hashlib.sha256(email.lower().encode("utf-8")).hexdigest()[:32]
    return f"{digest}@{_HASHED_DOMAIN}"
