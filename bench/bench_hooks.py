"""Git at its own speed with mplp-lsp's hooks installed.

Run from the repository root: ``python bench/bench_hooks.py [--quick] [--count N] [--rounds R]``.

One Git script (N commits, N ``git branch X && git branch -d X`` pairs, a topic branch of N
commits rebased onto main, then merged with ``--no-ff``) runs in fresh repositories, with
the hooks installed (``mplp-lsp hooks install``, no daemon: the hooks' background ingester
records) and without, alternating, R rounds; medians are reported.

* the script with hooks against the script without, same run: target ratio ≤ 1.5; and, as a
  second peer, the script with an empty ``reference-transaction`` hook (``exit 0``): what
  any hook costs on this machine, the floor (Git starts a process per hook run);
* one hook invocation, run as Git runs it (a new process, Git's input on stdin: the
  committed phase of a commit's transaction), against an empty hook run the same way:
  target ≤ 5 ms median; and the cost per hook run the script paid, from the script times
  and the number of hook runs (counted in a separate, untimed round);
* every operation recorded once: the events stored against what ``git reflog --all`` lists
  (commits, replayed commits, the merge, the topic branch) and the branch pairs the script
  made (Git deletes a branch's reflog with the branch). Target: equal.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchlib.harness import Bench, percentile

HOOK_INPUT = "{old} {new} HEAD\n{old} {new} refs/heads/main\n".format(old="1" * 40, new="2" * 40)
Op = tuple[str, str, str]  # (event_kind, ref_name or "" for a commit, commit_id)


def script(count: int) -> str:
    return " && ".join(
        [
            f"for i in $(seq 1 {count}); do echo $i >> f; git add f; git commit -qm c$i; done",
            f"for i in $(seq 1 {count}); do git branch b$i && git branch -d -q b$i; done",
            "git checkout -qb topic",
            f"for i in $(seq 1 {count}); do echo $i >> t; git add t; git commit -qm t$i; done",
            "git checkout -q main && echo m >> f && git commit -qam m",
            "git rebase -q main topic",
            "git checkout -q main && git merge -q --no-ff -m merge topic",
        ]
    )


def env() -> dict[str, str]:
    from tests.gitrepo import BASE_ENV

    return {k: v for k, v in {**os.environ, **BASE_ENV}.items() if k != "MPLP_LSP_STATE_DIR"}


def fresh(base: Path, name: str) -> Path:
    repo = base / name
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "base"]):
        subprocess.run(["git", *args], cwd=repo, env=env(), check=True)
    return repo


def install(repo: Path, state: Path) -> None:
    cli = Path(sys.executable).with_name("mplp-lsp")
    command = [str(cli), "hooks", "install", "--workspace", str(repo), "--state-dir", str(state)]
    subprocess.run(command, env=env(), check=True, capture_output=True)


def timed(repo: Path, count: int) -> float:
    started = time.perf_counter()
    subprocess.run(["sh", "-c", script(count)], cwd=repo, env=env(), check=True)
    return time.perf_counter() - started


def expected(repo: Path, count: int) -> Counter[Op]:
    """The operations the reflogs list, with the branch pairs the script made."""
    ops: Counter[Op] = Counter()
    out = subprocess.run(
        ["git", "reflog", "--all", "--format=%gD%x00%H%x00%gs"],
        cwd=repo, env=env(), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for line in out.splitlines():
        selector, commit, message = line.split("\0")
        ref = selector.rsplit("@{", 1)[0]
        if ref == "HEAD" and message.startswith(("commit: ", "rebase (pick): ")):
            ops[("commit", "", commit)] += 1
        elif ref == "HEAD" and message.startswith("merge topic: Merge made"):
            ops[("merge", "refs/heads/main", commit)] += 1
        elif ref.startswith("refs/heads/") and message.startswith("branch: Created from"):
            ops[("branch_create", ref, commit)] += 1
    pairs_at = subprocess.run(  # the pairs were made at main's tip after the N commits
        ["git", "log", "--format=%H", "--grep", f"^c{count}$", "main"],
        cwd=repo, env=env(), capture_output=True, text=True, check=True,
    ).stdout.split()[0]  # fmt: skip
    for i in range(1, count + 1):
        ops[("branch_create", f"refs/heads/b{i}", pairs_at)] += 1
        ops[("branch_delete", f"refs/heads/b{i}", pairs_at)] += 1
    return ops


def stored(state: Path) -> Counter[Op]:
    try:
        conn = sqlite3.connect(f"file:{state / 'events.db'}?mode=ro", uri=True)
    except sqlite3.OperationalError:  # not created yet
        return Counter()
    try:
        rows = conn.execute(
            "SELECT json_extract(body, '$.payload.event_kind'), "
            "json_extract(body, '$.payload.ref_name'), json_extract(body, '$.payload.commit_id') "
            "FROM events WHERE kind = 'git'"
        ).fetchall()
    except sqlite3.OperationalError:
        return Counter()
    finally:
        conn.close()
    return Counter((kind, "" if kind == "commit" else ref, commit) for kind, ref, commit in rows)


def recorded(state: Path, want: Counter[Op], limit: float) -> tuple[Counter[Op], float]:
    """What the store holds once the ingester is done (or ``limit`` seconds passed), and
    how long that took."""
    started = time.perf_counter()
    marker = state / "git-spool" / "ingester"
    while time.perf_counter() - started < limit:
        got = stored(state)
        idle = not marker.exists() and not (state / "git-spool" / "log").exists()
        if got == want or (idle and not want - got):
            return got, time.perf_counter() - started
        time.sleep(0.05)
    return stored(state), time.perf_counter() - started


def empty_hooked(base: Path, name: str, program: Path | None = None) -> Path:
    """A repository whose reference-transaction hook does nothing: a shell script that
    exits, or a copy of ``program``."""
    repo = fresh(base, name)
    hook = repo / ".git" / "hooks" / "reference-transaction"
    if program is None:
        hook.write_text("#!/bin/sh\nexit 0\n")
    else:
        shutil.copy(program, hook)
    hook.chmod(0o755)
    return repo


def compiled_nothing(base: Path) -> Path | None:
    """A program that only exits, compiled here (static where the C library allows), or
    None without a C compiler: no hook Git can run costs less than starting it."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    source, program = base / "nothing.c", base / "nothing"
    source.write_text("int main(void) { return 0; }\n")
    for static in (["-static"], []):
        built = subprocess.run(
            [compiler, "-O2", *static, "-o", str(program), str(source)], capture_output=True
        )
        if built.returncode == 0:
            return program
    return None


def hook_runs(base: Path, count: int) -> int:
    """How many times Git runs the hook in the script (a chained hook that counts)."""
    repo, state = fresh(base, "counted"), base / "counted-state"
    install(repo, state)
    counter = base / "runs"
    hook = repo / ".git" / "hooks" / "reference-transaction.mplp-lsp-chained"
    hook.write_text(f"#!/bin/sh\ncat > /dev/null\nprintf x >> {counter}\n")
    hook.chmod(0o755)
    timed(repo, count)
    return len(counter.read_text())


def invocation(path: Path, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([str(path), "committed"], input=HOOK_INPUT, text=True, check=False)
        times.append(time.perf_counter() - started)
    return times


def ingesters_ended(base: Path, limit: float = 120.0) -> None:
    """Wait until the ingesters the hooks started have ended: one lingers a few seconds
    after its last record, and removing the stores under it raced its last writes (the
    temporary directory was "not empty" when it was removed, under load)."""
    deadline = time.monotonic() + limit
    for marker in base.glob("*/git-spool/ingester"):
        while time.monotonic() < deadline:
            try:
                named = marker.read_text().strip()
            except FileNotFoundError:
                break  # released: the ingester is done with the store
            if named == str(os.getpid()):
                break  # the stand-in this bench wrote: no ingester behind it
            time.sleep(0.05)
        else:
            raise SystemExit(f"bench_hooks: an ingester did not end in {limit:.0f} s")


def main(bench: Bench, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        plain_times, empty_times, hooked_times, lags = [], [], [], []
        compiled_times: list[float] = []
        nothing = compiled_nothing(base)
        complete = True
        for round_ in range(args.rounds):
            plain_times.append(timed(fresh(base, f"plain{round_}"), args.count))
            empty_times.append(timed(empty_hooked(base, f"empty{round_}"), args.count))
            if nothing is not None:
                compiled = empty_hooked(base, f"compiled{round_}", nothing)
                compiled_times.append(timed(compiled, args.count))
            repo, state = fresh(base, f"hooked{round_}"), base / f"state{round_}"
            install(repo, state)
            hooked_times.append(timed(repo, args.count))
            want = expected(repo, args.count)
            got, lag = recorded(state, want, limit=600)
            lags.append(lag)
            if got != want:
                complete = False
                print(f"round {round_}: missing {dict(want - got)}, extra {dict(got - want)}")
        plain, hooked = percentile(plain_times, 0.5), percentile(hooked_times, 0.5)
        empty = percentile(empty_times, 0.5)
        bench.figure(
            f"the script with hooks ({args.rounds} round(s), median)",
            hooked * 1000,
            "ms",
            target="ratio <= 1.5",
            met=hooked <= 1.5 * plain,
            peer=("the same script without hooks", plain * 1000),
        )
        bench.figure(
            "the script with an empty hook, the floor",
            empty * 1000,
            "ms",
            peer=("the same script without hooks", plain * 1000),
        )
        if compiled_times:
            bench.figure(
                "the script with a compiled hook that only exits",
                percentile(compiled_times, 0.5) * 1000,
                "ms",
                peer=("the same script without hooks", plain * 1000),
            )
        else:
            print("the script with a compiled hook that only exits: skipped (no C compiler)")
        runs = hook_runs(base, args.count)
        print(f"hook runs in the script: {runs}")
        bench.figure(
            "cost per hook run in the script ((with - without) / runs)",
            (hooked - plain) / runs * 1000,
            "ms",
            peer=("an empty hook's, the same way", (empty - plain) / runs * 1000),
        )
        # A hook's own cost: a live process is named the ingester, so none is started.
        repo, state = fresh(base, "single"), base / "single-state"
        install(repo, state)
        (state / "git-spool" / "ingester").write_text(f"{os.getpid()}\n")
        ours = repo / ".git" / "hooks" / "reference-transaction"
        nothing = empty_hooked(base, "single-empty") / ".git" / "hooks" / "reference-transaction"
        mine, peer = [], []
        for _ in range(args.invocations // 20):  # interleaved: both see the same load
            mine += invocation(ours, 20)
            peer += invocation(nothing, 20)
        bench.figure(
            f"one hook invocation ({len(mine)} runs, median)",
            percentile(mine, 0.5) * 1000,
            "ms",
            target="<= 5 ms",
            met=percentile(mine, 0.5) <= 0.005,
            peer=("an empty hook, run the same way", percentile(peer, 0.5) * 1000),
        )
        bench.figure(
            "hook -> stored, after the script (median)", percentile(lags, 0.5) * 1000, "ms"
        )
        print(
            "every operation recorded once (against git reflog --all): "
            + ("yes" if complete else "NO")
            + f"   target: {bench.verdict(complete)}"
        )
        ingesters_ended(base)


if __name__ == "__main__":
    bench = Bench(__doc__)
    bench.size("--count", full=20, quick=3, help="commits, branch pairs and rebased commits")
    bench.size("--rounds", full=5, quick=1, help="rounds of the script, with and without hooks")
    bench.size("--invocations", full=200, quick=20, help="single hook invocations timed")
    with bench.run() as arguments:
        main(bench, arguments)
