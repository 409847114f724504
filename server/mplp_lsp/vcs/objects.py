"""Tags read by object id, many in one ``git cat-file --batch`` fed on standard input.

Ids only, never names: a ref name is whatever a repository holds (one of 100 KB crashed
``git for-each-ref`` given it as a pattern), and a thousand of them on one command line
would not fit. A missing object (pruned, or beyond a shallow clone's boundary) is simply
absent from the answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mplp_lsp.vcs.refs import is_oid
from mplp_lsp.vcs.repo import GitRepo

_PEEL_DEPTH = 8  # a tag of a tag of ...: git itself stops somewhere too


@dataclass(frozen=True, slots=True)
class TagInfo:
    commit_id: str
    tagged_at: int | None  # tagger date of an annotated tag


def read_objects(repo: GitRepo, ids: Iterable[str]) -> dict[str, tuple[str, bytes]]:
    """``{id: (type, content)}`` for the objects the repository has."""
    wanted = [oid for oid in dict.fromkeys(ids) if is_oid(oid)]
    if not wanted:
        return {}
    out = repo.run_fed_bytes("cat-file", "--batch", stdin="\n".join(wanted) + "\n")
    objects: dict[str, tuple[str, bytes]] = {}
    position = 0
    while position < len(out):
        end = out.index(b"\n", position)
        header = out[position:end].decode("ascii", "replace").split(" ")
        position = end + 1
        if len(header) != 3 or not header[2].isdigit():
            continue  # "<id> missing"
        size = int(header[2])
        objects[header[0]] = (header[1], out[position : position + size])
        position += size + 1
    return objects


def tag_infos(repo: GitRepo, object_ids: Iterable[str]) -> dict[str, TagInfo]:
    """For each object a tag ref names, the commit it tags (through tags of tags) and, for
    an annotated tag, its date; objects that are no commit and tag none are left out."""
    pending = {oid: oid for oid in object_ids}  # tag object -> where peeling has got
    tagged: dict[str, int | None] = dict.fromkeys(pending)
    infos: dict[str, TagInfo] = {}
    for _ in range(_PEEL_DEPTH):
        if not pending:
            break
        objects = read_objects(repo, pending.values())
        following: dict[str, str] = {}
        for start, current in pending.items():
            kind, content = objects.get(current, ("", b""))
            if kind == "commit":
                infos[start] = TagInfo(current, tagged[start])
            elif kind == "tag":
                target, moment = _tag_fields(content)
                if tagged[start] is None and current == start:
                    tagged[start] = moment
                if target is not None:
                    following[start] = target
        pending = following
    return infos


def _tag_fields(content: bytes) -> tuple[str | None, int | None]:
    target, moment = None, None
    for line in content.decode("utf-8", "replace").split("\n"):
        if not line:
            break  # the message follows
        if line.startswith("object ") and is_oid(line[7:]):
            target = line[7:]
        elif line.startswith("tagger "):
            moment = _signature_time(line)
    return target, moment


def _signature_time(line: str) -> int | None:
    """The time of a ``tagger`` line: ``tagger <name> <email> <time> <tz>``."""
    fields = line.rsplit(">", 1)[-1].split()
    return int(fields[0]) if fields and fields[0].lstrip("-").isdigit() else None
