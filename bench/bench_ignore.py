"""Microseconds per IgnoreRules.is_ignored() call on a burst of paths, beside `git check-ignore`.

Run from the repository root: python bench/bench_ignore.py [--quick] [--paths N] [--rounds R]

Builds a throw-away repository with a typical mix of ignore files (a root .gitignore for a
Python + Node project, nested ones in two packages, info/exclude) and a directory tree, then
times one burst of N workspace-relative paths (sources, node_modules, build output, caches):

* cold: a fresh IgnoreRules (reads and compiles the ignore files while answering);
* warm: the same object again (directory verdicts cached), best of R rounds;
* peer: one `git check-ignore --stdin -z --no-index` process over the same paths.

It also counts paths on which the two disagree (expected: 0).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchlib.harness import Bench
from mplp_lsp.ignore.rules import IgnoreRules

ROOT_GITIGNORE = """\
# Python
__pycache__/
*.py[cod]
.venv/
.mypy_cache/
.pytest_cache/
*.egg-info/
dist/
build/
.coverage
htmlcov/
# Node
node_modules/
*.log
!important.log
coverage/
.next/
# Editors
.idea/
*.swp
.DS_Store
/local/
docs/_build/
**/tmp/**
"""
NESTED = {
    "packages/web/.gitignore": "*.map\n/out/\n!keep.map\n",
    "packages/api/.gitignore": "*.sqlite\nsecrets/\n",
}
EXCLUDE = "*.orig\nscratch/\n"
STATE_DIR = ".mplp-state"


def git_env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }


def burst(n: int) -> list[str]:
    """A mix shaped like a file-event burst after `npm install` + a build + edits."""
    kinds = [
        lambda i: f"src/pkg{i % 40}/module_{i}.py",
        lambda i: f"src/pkg{i % 40}/__pycache__/module_{i}.cpython-311.pyc",
        lambda i: f"node_modules/dep{i % 300}/lib/file_{i}.js",
        lambda i: f"packages/web/src/components/c{i % 50}/view_{i}.tsx",
        lambda i: f"packages/web/dist/chunk_{i}.js.map",
        lambda i: f"packages/web/out/page_{i}.html",
        lambda i: f"packages/api/app/routes_{i}.py",
        lambda i: f"packages/api/secrets/key_{i}.pem",
        lambda i: f"build/lib/pkg{i % 40}/module_{i}.py",
        lambda i: f"logs/run_{i}.log",
        lambda i: f"docs/guide/page_{i}.md",
        lambda i: f"a/b/tmp/cache_{i}.bin",
        lambda i: f"{STATE_DIR}/wal_{i}",
        lambda i: f"notes/{i}.orig",
    ]
    return [kinds[i % len(kinds)](i) for i in range(n)]


def build_repo(base: Path, paths: list[str]) -> Path:
    repo = base / "ws"
    repo.mkdir()
    (base / "home").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, env=git_env(base / "home"), check=True)
    (repo / ".gitignore").write_text(ROOT_GITIGNORE)
    for rel, text in NESTED.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text(EXCLUDE)
    for rel in {p.rpartition("/")[0] for p in paths}:
        (repo / rel).mkdir(parents=True, exist_ok=True)
    return repo.resolve()


def timed(fn: Callable[[str], bool], paths: list[str]) -> tuple[float, set[str]]:
    start = time.perf_counter()
    ignored = {p for p in paths if fn(p)}
    return time.perf_counter() - start, ignored


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--paths", full=20_000, quick=200, help="paths in the burst")
    bench.size("--rounds", full=5, quick=1, help="warm rounds (the best is shown)")
    with bench.run() as args:
        compare(bench, args.paths, args.rounds)


def compare(bench: Bench, count: int, rounds: int) -> None:
    paths = burst(count)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = build_repo(base, paths)
        rules = IgnoreRules(repo, internal_dirs=[repo / STATE_DIR])
        cold, ours = timed(rules.is_ignored, paths)
        warm = min(timed(rules.is_ignored, paths)[0] for _ in range(rounds))

        start = time.perf_counter()
        done = subprocess.run(
            ["git", "check-ignore", "--stdin", "-z", "--no-index"],
            cwd=repo,
            input=b"\0".join(p.encode() for p in paths) + b"\0",
            capture_output=True,
            env=git_env(base / "home"),
            check=False,
        )
        peer = time.perf_counter() - start
    theirs = {p.decode() for p in done.stdout.split(b"\0") if p}
    # Git does not know the daemon's state dir; compare the rest.
    comparable = [p for p in paths if not p.startswith(STATE_DIR + "/")]
    disagree = sum((p in ours) != (p in theirs) for p in comparable)
    n = len(paths)
    print(f"paths: {n} ({len(ours)} ignored)")
    git = ("git check-ignore --stdin, one process", peer / n * 1e6)
    bench.figure("IgnoreRules.is_ignored, cold", cold / n * 1e6, "µs/path", peer=git)
    bench.figure("IgnoreRules.is_ignored, warm", warm / n * 1e6, "µs/path", peer=git)
    print(f"disagreements with git: {disagree} (expected 0)")


if __name__ == "__main__":
    main()
