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
  ``C``, oldest first; a fast-forward merge or pull is one ``merge`` of the new tip (after
  ``C``, which is empty unless the merged branch was never seen: gone before a poll).
* ``refs/heads/*`` deleted: ``branch_delete`` of the commit it pointed to.
* ``refs/tags/*`` created or moved: ``tag`` of the tagged commit.
* ``refs/remotes/*`` moved by ``update by push``: ``push``.
* a detached ``HEAD`` moved by ``commit``: its commits, with ``ref_name`` ``HEAD``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.settings import EmailPolicy
from mplp_lsp.vcs.refs import HEAD, ZERO
from mplp_lsp.vcs.repo import GitRepo

EventKind = Literal["commit", "push", "merge", "tag", "branch_create", "branch_delete"]
MessageLookup = Callable[[str, str], str | None]  # (ref, new value) -> its reflog message

_HASHED_DOMAIN = "hashed.invalid"
MERGE_MESSAGES = ("merge ", "merge:", "pull:", "pull ")


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


@dataclass(frozen=True, slots=True)
class TagInfo:
    commit_id: str
    tagged_at: int | None  # tagger date of an annotated tag


def plan(
    repo: GitRepo, updates: Sequence[RefUpdate], known: set[str], message: MessageLookup
) -> list[Planned]:
    """What ``updates`` mean, in order. ``known`` (tips before them) grows as they apply."""
    planned: list[Planned] = []
    for update in updates:
        created, deleted = update.old == ZERO, update.new == ZERO
        if update.ref == HEAD:
            if not deleted and _starts(message(HEAD, update.new), ("commit",)):
                planned += _commits(repo, update, known)
        elif update.ref.startswith("refs/heads/"):
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
                if _starts(moved_by, MERGE_MESSAGES) and (not commits or _fast_forward(moved_by)):
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
    exclude = known | ({update.old} if update.old != ZERO else set())
    out = repo.run("rev-list", "--topo-order", "--reverse", update.new, "--not", *sorted(exclude))
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


def tag_infos(repo: GitRepo, tags: dict[str, str]) -> dict[str, TagInfo]:
    """For each tag ref (name → the object id it had), the commit it names and its date."""
    if not tags:
        return {}
    out = repo.run(
        "for-each-ref",
        "--format=%(refname)%00%(objectname)%00%(*objectname)%00%(taggerdate:unix)",
        *tags,
    )
    infos: dict[str, TagInfo] = {}
    for line in out.splitlines():
        name, object_id, peeled, tagged = [*line.split("\0"), "", "", ""][:4]
        if tags.get(name) != object_id:
            continue  # moved again since: the next update reports it
        infos[name] = TagInfo(peeled or object_id, int(tagged) if tagged.isdigit() else None)
    return infos


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
    tags = tag_infos(repo, {p.ref: p.object_id for p in planned if p.kind == "tag"})
    commit_of = {
        p: tags[p.ref].commit_id if p.kind == "tag" and p.ref in tags else p.object_id
        for p in planned
    }
    infos = commit_infos(repo, commit_of.values())
    url = repo_url if repo_url is not None else repo.repo_url()
    payloads = []
    for item in planned:
        info = infos.get(commit_of[item])
        if info is None or (item.kind == "tag" and item.ref not in tags):
            continue  # the object is gone (pruned) or the tag moved on: nothing exact to say
        kind: EventKind = item.kind or ("merge" if len(info.parents) > 1 else "commit")
        moment = info.committed_at
        if item.kind == "tag" and tags[item.ref].tagged_at is not None:
            moment = tags[item.ref].tagged_at or moment
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
