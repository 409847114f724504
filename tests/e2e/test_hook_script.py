"""The hook scripts ``hooks install`` writes, run as Git runs them, by dash and by bash (the
/bin/sh of other systems): shell builtins only (no program can be found on their PATH, yet
they record), the chained hook's input and exit status kept, one background ingester at a
time, and Git's input only ever data."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from mplp_lsp.vcs.hooks import hook_script
from mplp_lsp.vcs.spool import Spool
from mplp_lsp.vcs.spool_records import HookRecord

SHELLS = [name for name in ("dash", "bash") if shutil.which(name)]
OLD, NEW = "1" * 40, "2" * 40
LINES = f"{OLD} {NEW} HEAD\n{OLD} {NEW} refs/heads/main\n{OLD} {NEW} ORIG_HEAD\n"


class Hook:
    """One hook script in a hooks dir of its own, recording into ``spool``."""

    def __init__(self, tmp: Path, name: str, shell: str) -> None:
        self.top = tmp / "ws"
        self.top.mkdir(exist_ok=True)
        self.spool = Spool(tmp / "spool")
        self.spool.ensure()
        self.started = tmp / "started"  # the fake ingester notes each start here
        ingester = tmp / "ingester.sh"
        ingester.write_text(f'#!{shutil.which("sh")}\necho "$$" >> {self.started}\n')
        ingester.chmod(0o755)
        self.path = tmp / "hooks" / name
        self.path.parent.mkdir(exist_ok=True)
        self.chained = Path(str(self.path) + ".mplp-lsp-chained")
        self.path.write_text(
            hook_script(name, self.chained, self.spool.directory, self.top, [str(ingester)])
        )
        self.shell = shell

    def chain(self, body: str) -> None:
        self.chained.write_text(f"#!{shutil.which('sh')}\n{body}\n")
        self.chained.chmod(0o755)

    def run(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        # Nothing to be found on PATH: a hook that ran a program would fail to record.
        env = {"PATH": str(self.top / "nothing-here"), "HOME": "/nonexistent"}
        done = subprocess.run(
            [shutil.which(self.shell) or self.shell, str(self.path), *args],
            cwd=self.top,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=30,
        )
        self._settle()
        return done

    def _settle(self) -> None:
        # The ingester runs in the background: wait for it to have noted its start.
        deadline = time.monotonic() + 10
        marker = self.spool.directory / "ingester"
        while marker.exists() and not marker.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.01)

    def records(self) -> list[HookRecord]:
        return [spooled.record for _name, spooled in self.spool.take({}).records]

    def starts(self) -> int:
        # Generous: the start is in the background, and a loaded machine can stall it
        # (one CI run saw none within 10 s, at a load average of 5.5).
        deadline = time.monotonic() + 60
        while not self.started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return len(self.started.read_text().split()) if self.started.exists() else 0


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_committed_transaction_is_recorded_with_builtins_only(tmp_path: Path, shell: str) -> None:
    hook = Hook(tmp_path, "reference-transaction", shell)
    done = hook.run("committed", stdin=LINES)
    assert done.returncode == 0, done.stderr
    [record] = hook.records()
    assert record.hook == "reference-transaction" and record.here
    assert record.lines == (f"{OLD} {NEW} HEAD", f"{OLD} {NEW} refs/heads/main")  # no ORIG_HEAD
    assert hook.starts() == 1


def test_other_phases_record_nothing_and_the_chained_hook_decides(
    tmp_path: Path, shell: str
) -> None:
    hook = Hook(tmp_path, "reference-transaction", shell)
    seen = tmp_path / "seen"
    cat = shutil.which("cat")  # the hook's PATH finds nothing: the chained hook's own way
    hook.chain(f'{cat} > {seen}; [ "$1" = prepared ] && exit 3; exit 0')
    assert hook.run("prepared", stdin=LINES).returncode == 3  # a veto stays a veto
    assert seen.read_text() == LINES
    assert hook.run("aborted", stdin=LINES).returncode == 0
    assert hook.records() == []
    assert hook.run("committed", stdin=LINES).returncode == 0
    assert seen.read_text() == LINES  # the chained hook got Git's input unchanged
    assert len(hook.records()) == 1


def test_one_ingester_at_a_time_and_a_gone_one_is_replaced(tmp_path: Path, shell: str) -> None:
    hook = Hook(tmp_path, "reference-transaction", shell)
    marker = hook.spool.directory / "ingester"
    marker.write_text(f"{os.getpid()}\n")  # a live ingester: this process
    hook.run("committed", stdin=LINES)
    assert not hook.started.exists()
    marker.write_text("")  # one being started right now
    hook.run("committed", stdin=LINES)
    assert not hook.started.exists()
    marker.write_text("999999999\n")  # no such process
    hook.run("committed", stdin=LINES)
    assert hook.starts() == 1
    assert len(hook.records()) == 3


def test_pre_push_records_only_a_push_that_goes_ahead(tmp_path: Path, shell: str) -> None:
    hook = Hook(tmp_path, "pre-push", shell)
    line = f"refs/heads/main {NEW} refs/heads/main {OLD}\n"
    url = "https://user:s3cret@example.org/repo.git"
    hook.chain("exit 1")
    assert hook.run("origin", url, stdin=line).returncode == 1
    assert hook.records() == []
    hook.chain("exit 0")
    assert hook.run("origin", url, stdin=line).returncode == 0
    [record] = hook.records()
    assert record.lines == (line.strip(),) and record.args == ()
    spooled = "".join(p.read_text() for p in hook.spool.directory.iterdir() if p.is_file())
    assert "s3cret" not in spooled


def test_post_commit_notes_the_ref_and_commit_it_ran_for(tmp_path: Path, shell: str) -> None:
    hook = Hook(tmp_path, "post-commit", shell)
    git = hook.top / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text(NEW + "\n")
    assert hook.run().returncode == 0
    [record] = hook.records()
    assert record.args == (NEW, "refs/heads/main")


def test_a_long_transaction_goes_to_a_side_file(tmp_path: Path, shell: str) -> None:
    hook = Hook(tmp_path, "reference-transaction", shell)
    many = "".join(f"{OLD} {NEW} refs/tags/release-{i:05d}\n" for i in range(300))
    assert hook.run("committed", stdin=many).returncode == 0
    [record] = hook.records()
    assert len(record.lines) == 300
    assert any(p.name.startswith("big.") for p in hook.spool.directory.iterdir())


HOSTILE = [
    "refs/heads/$(touch${IFS}pwned)",
    "refs/heads/`touch${IFS}pwned`",
    "refs/heads/a';touch${IFS}pwned;'",
    'refs/heads/b";touch${IFS}pwned;"',
    "refs/heads/c|touch${IFS}pwned&&x>pwned",
    "refs/heads/%s%n%x",
]


def test_ref_names_are_data(tmp_path: Path, shell: str) -> None:
    hook = Hook(tmp_path, "reference-transaction", shell)
    text = "".join(f"{OLD} {NEW} {name}\n" for name in HOSTILE)
    assert hook.run("committed", stdin=text).returncode == 0
    [record] = hook.records()
    assert record.lines == tuple(f"{OLD} {NEW} {name}" for name in HOSTILE)
    assert not list(tmp_path.rglob("pwned")) and not Path("/pwned").exists()
