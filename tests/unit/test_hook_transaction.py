"""What the reference-transaction hook script spools, parsed (a property test over its
lines), and `hooks install` writing the state dir the caller sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.vcs.hook_updates import parse_transaction
from mplp_lsp.vcs.operations import RefUpdate
from mplp_lsp.vcs.refs import ZERO
from tests.gitrepo import Repo

oids = st.sampled_from([ZERO, "a" * 40, "b" * 40, "c" * 40])
refs = st.sampled_from(["HEAD", "refs/heads/main", "refs/heads/x", "refs/tags/v1", "ORIG_HEAD"])
updates = st.lists(st.tuples(oids, oids, refs), max_size=6)
tips = st.dictionaries(st.sampled_from(["refs/heads/main", "refs/heads/x"]), oids, max_size=2)


@given(
    lines=updates, phase=st.sampled_from(["committed", "prepared"]), tip=tips, head=st.booleans()
)
def test_the_spool_parses_back(
    lines: list[tuple[str, str, str]], phase: str, tip: dict[str, str], head: bool
) -> None:
    text = [f"{old} {new} {ref}" for old, new, ref in lines]
    text.append(f"phase {phase} 4242")
    marked = sorted(tip)[:1] if head else []
    text += [f"tip {oid} {ref} {'*' if ref in marked else ''}" for ref, oid in tip.items()]
    noted = parse_transaction(text)
    watched = [RefUpdate(r, o, n) for o, n, r in lines if r != "ORIG_HEAD"]
    assert noted.updates == watched
    assert noted.phase == phase and noted.git_pid == 4242
    assert noted.refs is not None and noted.refs.refs == tip
    assert noted.refs.head_target == (marked[0] if marked else None)
    deletions = noted.deletions()
    reported = noted.reported()
    if phase == "prepared":
        assert reported == []
        assert all(d.new == ZERO and d.old == tip[d.ref] for d in deletions)
        assert {d.ref for d in deletions} == {
            u.ref for u in watched if u.old == u.new == ZERO and u.ref in tip
        }
    else:
        assert deletions == []
        assert reported == [u for u in watched if not u.old == u.new == ZERO]


def test_a_spool_from_an_older_script_notes_nothing() -> None:
    noted = parse_transaction([f"{ZERO} {'a' * 40} refs/heads/main"])
    assert noted.refs is None and noted.phase == ""
    assert noted.reported() == [RefUpdate("refs/heads/main", ZERO, "a" * 40)]


def test_hooks_install_writes_the_state_dir_from_the_environment(tmp_path: Path) -> None:
    repo = Repo.create(tmp_path / "ws")
    state = tmp_path / "from-env"
    env = {**os.environ, "MPLP_LSP_STATE_DIR": str(state)}
    done = subprocess.run(
        [sys.executable, "-m", "mplp_lsp", "hooks", "install", "--workspace", str(repo.path)],
        env=env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    hook = (repo.path / ".git" / "hooks" / "post-commit").read_text()
    assert f"--state-dir {state}" in hook
