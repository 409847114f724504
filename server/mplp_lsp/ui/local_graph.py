"""The project graph as the dashboard shows it: recent nodes of each type, and plans with
their steps in dependency order. Read-only queries on the workspace store."""

from __future__ import annotations

import json
import sqlite3
from graphlib import CycleError, TopologicalSorter
from typing import Any, Final

LIMIT: Final = 100


def _like(search: str) -> str:
    escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def graph(conn: sqlite3.Connection, search: str = "") -> dict[str, Any]:
    """Files, commits, branches, authors and plans matching ``search`` (all when empty)."""
    like = _like(search)
    files = [
        {"path": path, "last_modified": at, "size": size}
        for path, at, size in conn.execute(
            "SELECT path, last_modified, size FROM psg_files WHERE path LIKE ? ESCAPE '\\'"
            " ORDER BY last_modified DESC LIMIT ?",
            (like, LIMIT),
        )
    ]
    commits = [
        {
            "commit_id": commit_id,
            "committed_at": at,
            "message": message,
            "author": author,
            "branches": branches.split("\n") if branches else [],
        }
        for commit_id, at, message, author, branches in conn.execute(
            "SELECT c.commit_id, c.committed_at, c.message, coalesce(a.name, a.email),"
            " (SELECT group_concat(b.ref_name, char(10)) FROM psg_commit_branches AS b"
            "   WHERE b.commit_id = c.commit_id)"
            " FROM psg_commits AS c LEFT JOIN psg_authors AS a ON a.author_id = c.author_id"
            " WHERE c.commit_id LIKE ? ESCAPE '\\' OR c.message LIKE ? ESCAPE '\\'"
            " OR a.name LIKE ? ESCAPE '\\' ORDER BY c.committed_at DESC LIMIT ?",
            (like, like, like, LIMIT),
        )
    ]
    branches = [
        {"ref_name": ref, "head_commit": head}
        for ref, head in conn.execute(
            "SELECT ref_name, head_commit FROM psg_branches WHERE ref_name LIKE ? ESCAPE '\\'"
            " ORDER BY ref_name LIMIT ?",
            (like, LIMIT),
        )
    ]
    authors = [
        {"name": name, "email": email, "commits": count}
        for name, email, count in conn.execute(
            "SELECT a.name, a.email, count(c.commit_id) FROM psg_authors AS a"
            " LEFT JOIN psg_commits AS c ON c.author_id = a.author_id"
            " WHERE a.name LIKE ? ESCAPE '\\' OR a.email LIKE ? ESCAPE '\\'"
            " GROUP BY a.author_id ORDER BY count(c.commit_id) DESC LIMIT ?",
            (like, like, LIMIT),
        )
    ]
    return {
        "files": files,
        "commits": commits,
        "branches": branches,
        "authors": authors,
        "plans": plans(conn, like),
    }


def plans(conn: sqlite3.Connection, like: str = "%") -> list[dict[str, Any]]:
    """Plans (newest first), each with its steps in an order that respects dependencies."""
    out = []
    for plan_id, status, status_at, body in conn.execute(
        "SELECT plan_id, status, status_at, body FROM psg_plans"
        " WHERE plan_id LIKE ? ESCAPE '\\' OR json_extract(body, '$.title') LIKE ? ESCAPE '\\'"
        " ORDER BY created_at DESC LIMIT ?",
        (like, like, LIMIT),
    ):
        fields = json.loads(body)
        out.append(
            {
                "plan_id": plan_id,
                "title": fields.get("title"),
                "status": status,
                "status_at": status_at,
                "steps": _ordered_steps(conn, plan_id),
            }
        )
    return out


def _ordered_steps(conn: sqlite3.Connection, plan_id: str) -> list[dict[str, Any]]:
    steps: dict[str, dict[str, Any]] = {}
    for step_id, status, status_at, body in conn.execute(
        "SELECT step_id, status, status_at, body FROM psg_steps WHERE plan_id = ?"
        " ORDER BY position",
        (plan_id,),
    ):
        steps[step_id] = {
            "step_id": step_id,
            "description": json.loads(body).get("description"),
            "status": status,
            "status_at": status_at,
            "depends_on": [],
        }
    for step_id, target in conn.execute(
        "SELECT d.step_id, d.depends_on FROM psg_step_dependencies AS d"
        " JOIN psg_steps AS s ON s.step_id = d.step_id WHERE s.plan_id = ?",
        (plan_id,),
    ):
        steps[step_id]["depends_on"].append(target)
    sorter = TopologicalSorter({step_id: s["depends_on"] for step_id, s in steps.items()})
    try:
        order = list(sorter.static_order())
    except CycleError:  # the store refuses cycles; keep the recorded order if one slipped in
        order = list(steps)
    return [steps[step_id] for step_id in order if step_id in steps]
