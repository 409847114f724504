"""IgnoreRules against Git itself: every scenario is also checked with `git check-ignore`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.ignore.rules import IgnoreRules
from tests.support.properties import examples


def git_env(home: Path) -> dict[str, str]:
    """Keep the user's and the system's Git configuration (and ignore files) out of the tests."""
    return {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }


def git(cwd: Path, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> bytes:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env=git_env(cwd.parent / "home"),
        check=False,
    )
    assert done.returncode in ok, done.stderr.decode()
    return done.stdout


def init_repo(parent: Path, name: str = "ws") -> Path:
    repo = parent / name
    repo.mkdir(parents=True)
    (parent / "home").mkdir(exist_ok=True)
    git(repo, "init", "-q")
    return repo.resolve()


def git_ignored(repo: Path, paths: Iterable[str], *config: str) -> set[str]:
    """The paths Git reports as ignored, asked in one `git check-ignore --stdin` run."""
    listed = list(paths)
    if not listed:
        return set()
    out = git(
        repo,
        *config,
        "check-ignore",
        "--stdin",
        "-z",
        "--no-index",
        stdin=b"\0".join(p.encode() for p in listed) + b"\0",
        ok=(0, 1),
    )
    return {p.decode() for p in out.split(b"\0") if p}


def write(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def make_dirs(root: Path, *dirs: str) -> None:
    for rel in dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)


def verdicts(rules: IgnoreRules, paths: Iterable[str]) -> dict[str, bool]:
    return {p: rules.is_ignored(p) for p in paths}


def assert_matches(rules: IgnoreRules, repo: Path, expected: Mapping[str, bool]) -> None:
    """Our verdicts equal the expectation, and Git agrees with the expectation."""
    assert verdicts(rules, expected) == dict(expected)
    assert git_ignored(repo, expected) == {p for p, ignored in expected.items() if ignored}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path)


def test_nested_gitignore_files_scope_to_their_directory(repo: Path) -> None:
    write(
        repo,
        {
            ".gitignore": "*.log\n",
            "a/.gitignore": "!keep.log\n/local.txt\n",
            "a/b/.gitignore": "*.tmp\n",
        },
    )
    rules = IgnoreRules(repo)
    assert_matches(
        rules,
        repo,
        {
            "x.log": True,
            "keep.log": True,
            "a/x.log": True,
            "a/keep.log": False,
            "a/b/keep.log": False,
            "a/local.txt": True,
            "a/b/local.txt": False,
            "local.txt": False,
            "a/b/x.tmp": True,
            "a/x.tmp": False,
            "a/b/c/x.tmp": True,
        },
    )


def test_negation_cannot_reinclude_below_an_ignored_directory(repo: Path) -> None:
    write(
        repo,
        {
            ".gitignore": "build/\n!build/keep.txt\nlogs/*\n!logs/keep.txt\n",
            "build/.gitignore": "!*\n",
            "build/keep.txt": "",
            "logs/keep.txt": "",
        },
    )
    assert_matches(
        IgnoreRules(repo),
        repo,
        {
            "build": True,
            "build/keep.txt": True,
            "build/.gitignore": True,
            "build/deep/x": True,
            "logs": False,
            "logs/keep.txt": False,
            "logs/other.txt": True,
        },
    )


def test_directory_only_patterns_need_a_directory(repo: Path) -> None:
    write(repo, {".gitignore": "out/\ngone/\nlink/\n", "sub/out": "a file", "real/x": ""})
    make_dirs(repo, "out", "deep/out")
    (repo / "link").symlink_to(repo / "real")
    assert_matches(
        IgnoreRules(repo),
        repo,
        {
            "out": True,
            "out/x.txt": True,
            "deep/out": True,
            "deep/out/y/z": True,
            "sub/out": False,
            "gone": False,  # does not exist: not a directory, for Git too
            "gone/x": True,  # has a child: a directory
            "link": False,  # a symlink to a directory is not a directory for Git
        },
    )


def test_trailing_slash_marks_a_directory_without_looking(repo: Path) -> None:
    write(repo, {".gitignore": "gone/\n"})
    rules = IgnoreRules(repo)
    assert rules.is_ignored("gone/")
    assert rules.is_ignored("a/gone/")
    assert not rules.is_ignored("gone")


def test_anchored_and_slashed_patterns_are_relative_to_their_file(repo: Path) -> None:
    write(repo, {".gitignore": "/only_root.txt\ndocs/*.md\n", "a/.gitignore": "/here\n"})
    assert_matches(
        IgnoreRules(repo),
        repo,
        {
            "only_root.txt": True,
            "a/only_root.txt": False,
            "docs/x.md": True,
            "a/docs/x.md": False,
            "docs/sub/x.md": False,
            "a/here": True,
            "here": False,
            "a/b/here": False,
        },
    )


def test_double_star(repo: Path) -> None:
    write(repo, {".gitignore": "**/cache\na/**/z\nlib/**\nfoo**/bar\n**/**/**/deep\n"})
    make_dirs(repo, "lib")
    assert_matches(
        IgnoreRules(repo),
        repo,
        {
            "cache": True,
            "x/y/cache": True,
            "a/z": True,
            "a/b/c/z": True,
            "b/a/z": False,
            "lib": False,
            "lib/x": True,
            "lib/x/y": True,
            "foo/x/y/bar": True,  # Git's literal-prefix quirk: "**" right after "foo" spans dirs
            "foobar": True,
            "fo/bar": False,
            "deep": True,
            "x/y/z/deep": True,
            "deeper": False,
        },
    )


def test_git_directory_and_git_files_are_always_ignored(repo: Path) -> None:
    write(repo, {"sub/.git": "gitdir: ../elsewhere\n", ".gitignore": "!.git\n"})
    rules = IgnoreRules(repo)
    for path in (".git", ".git/config", ".git/objects/ab/cd", "sub/.git", "x/.git/HEAD"):
        assert rules.is_ignored(path), path
    for path in (".github/workflows/ci.yml", "x.git", ".gitignore", "sub/.gitattributes"):
        assert not rules.is_ignored(path), path


def test_info_exclude_has_the_lowest_precedence(repo: Path) -> None:
    write(
        repo,
        {
            ".git/info/exclude": "secret.txt\n*.bak\n",
            "a/.gitignore": "!*.bak\n",
        },
    )
    assert_matches(
        IgnoreRules(repo),
        repo,
        {
            "secret.txt": True,
            "a/secret.txt": True,
            "x.bak": True,
            "a/x.bak": False,
        },
    )


def test_linked_worktree_reads_info_exclude_of_the_common_dir(tmp_path: Path) -> None:
    main = init_repo(tmp_path)
    identity = ("-c", "user.name=t", "-c", "user.email=t@example.org")
    git(main, *identity, "commit", "-q", "--allow-empty", "-m", "init")
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"))
    write(main, {".git/info/exclude": "*.secret\n"})
    worktree = (tmp_path / "wt").resolve()
    assert (worktree / ".git").is_file()
    rules = IgnoreRules(worktree)
    assert_matches(rules, worktree, {"a.secret": True, "d/b.secret": True, "a.txt": False})
    assert rules.is_ignored(".git")


def test_workspace_inside_a_repository_uses_the_outer_ignore_files(repo: Path) -> None:
    write(repo, {".gitignore": "*.log\nsub/gen/\n/sub/top.txt\n", "sub/.gitignore": "*.o\n"})
    write(repo, {".git/info/exclude": "*.bak\n"})
    make_dirs(repo, "sub/gen")
    workspace = repo / "sub"
    rules = IgnoreRules(workspace)
    expected = {
        "x.log": True,
        "gen": True,
        "gen/a.py": True,
        "top.txt": True,
        "a.o": True,
        "d/x.bak": True,
        "main.py": False,
    }
    assert verdicts(rules, expected) == expected
    in_repo = {f"sub/{p}" for p, ignored in expected.items() if ignored}
    assert git_ignored(repo, [f"sub/{p}" for p in expected]) == in_repo


def test_the_workspace_root_is_not_ignored_even_if_git_ignores_it(repo: Path) -> None:
    write(repo, {".gitignore": "vendor/\n"})
    make_dirs(repo, "vendor/lib")
    rules = IgnoreRules(repo / "vendor" / "lib")
    assert not rules.is_ignored("src/a.py")


def test_user_excludes_form_their_own_rule_set(repo: Path) -> None:
    write(repo, {".gitignore": "*.tmp\n!keep.log\n"})
    make_dirs(repo, "node_modules", "pkg/node_modules", "build")
    rules = IgnoreRules(repo, excludes=["node_modules/", "*.log", "build/**", "!x.tmp", "# c"])
    assert verdicts(
        rules,
        [
            "node_modules",
            "pkg/node_modules/a/index.js",
            "app.log",
            "keep.log",
            "build",
            "build/out/a.o",
            "x.tmp",
            "# c",
            "src/a.py",
        ],
    ) == {
        "node_modules": True,
        "pkg/node_modules/a/index.js": True,
        "app.log": True,
        "keep.log": True,  # a .gitignore negation does not undo the user's exclude
        "build": False,  # "build/**" matches what is inside, as in Git
        "build/out/a.o": True,
        "x.tmp": True,  # an exclude negation does not undo Git's ignore
        "# c": False,  # comment line
        "src/a.py": False,
    }


def test_with_excludes_returns_new_rules_and_keeps_the_old(repo: Path) -> None:
    write(repo, {".gitignore": "*.tmp\n"})
    first = IgnoreRules(repo, excludes=["*.log"])
    second = first.with_excludes(["dist/"])
    make_dirs(repo, "dist")
    assert (first.is_ignored("a.log"), first.is_ignored("dist")) == (True, False)
    assert (second.is_ignored("a.log"), second.is_ignored("dist")) == (False, True)
    assert first.is_ignored("a.tmp") and second.is_ignored("a.tmp")


def test_excludes_agree_with_git_as_an_excludes_file(repo: Path) -> None:
    patterns = ["node_modules/", "*.log", "!keep.log", "build/**", "/top.txt", "a/**/b"]
    write(repo.parent, {"excludes": "\n".join(patterns) + "\n"})
    make_dirs(repo, "node_modules", "x/node_modules", "build/sub", "a/q/b")
    paths = [
        "node_modules",
        "x/node_modules/y",
        "a.log",
        "keep.log",
        "d/keep.log",
        "build",
        "build/sub",
        "build/sub/f",
        "top.txt",
        "d/top.txt",
        "a/b",
        "a/q/b",
        "a/q/b/c",
    ]
    ours = {p for p in paths if IgnoreRules(repo, excludes=patterns).is_ignored(p)}
    excludes_file = str(repo.parent / "excludes")
    assert ours == git_ignored(repo, paths, "-c", f"core.excludesFile={excludes_file}")
    assert "keep.log" not in ours and "build/sub/f" in ours


def test_internal_dirs_are_ignored_when_inside_the_workspace(repo: Path, tmp_path: Path) -> None:
    make_dirs(repo, ".mplp-state/db", "real-state")
    (repo / "state-link").symlink_to(repo / "real-state")
    rules = IgnoreRules(
        repo,
        internal_dirs=[repo / ".mplp-state", tmp_path / "outside", repo / "state-link"],
    )
    assert rules.is_ignored(".mplp-state")
    assert rules.is_ignored(".mplp-state/db/events.sqlite")
    assert rules.is_ignored("real-state/x")  # resolved: the link's target is the state dir
    assert not rules.is_ignored(".mplp-state-other/x")
    assert not rules.is_ignored("outside/x")
    assert not rules.is_ignored("src/a.py")


def test_invalidate_after_editing_a_nested_gitignore(repo: Path) -> None:
    make_dirs(repo, "a/b")
    rules = IgnoreRules(repo)
    assert not rules.is_ignored("a/b/x.tmp")
    write(repo, {"a/.gitignore": "*.tmp\n"})
    rules.invalidate("a/.gitignore")
    assert rules.is_ignored("a/b/x.tmp")
    assert not rules.is_ignored("x.tmp")
    (repo / "a" / ".gitignore").unlink()
    rules.invalidate("a/.gitignore")
    assert not rules.is_ignored("a/b/x.tmp")


def test_invalidate_root_gitignore_can_unignore_a_directory(repo: Path) -> None:
    write(repo, {".gitignore": "vendor/\n"})
    make_dirs(repo, "vendor/a")
    rules = IgnoreRules(repo)
    assert rules.is_ignored("vendor/a/x.js")
    write(repo, {".gitignore": "*.min.js\n"})
    rules.invalidate(".gitignore")
    assert not rules.is_ignored("vendor/a/x.js")
    assert rules.is_ignored("vendor/a/x.min.js")


def test_invalidate_info_exclude(repo: Path) -> None:
    rules = IgnoreRules(repo)
    assert not rules.is_ignored("notes.txt")
    write(repo, {".git/info/exclude": "notes.txt\n"})
    rules.invalidate(".git/info/exclude")
    assert rules.is_ignored("notes.txt")


def test_invalidate_a_directory_path(repo: Path) -> None:
    make_dirs(repo, "a/b")
    rules = IgnoreRules(repo)
    assert not rules.is_ignored("a/b/c.txt")
    write(repo, {"a/b/.gitignore": "c.txt\n"})
    rules.invalidate("a/b")
    assert rules.is_ignored("a/b/c.txt")


def test_pattern_syntax_edge_cases(repo: Path) -> None:
    gitignore = (
        "\ufeff?\n"  # a BOM before the first line is skipped; "?" is one byte
        "[[:digit:]]*.dat\n"
        "[a-c]x\n"
        "[!a]y\n"
        "bad[\n"
        "trail\\\n"
        "\\#hash\n"
        "\\!bang\n"
        "spaced   \n"
        "kept\\ \n"
        "crlf\r\n"
        "# comment\n"
        "[]]z\n"
        "[z-a]w\n"
    )
    (repo / ".gitignore").write_bytes(gitignore.encode())
    expected = {
        "q": True,
        "é": False,  # two bytes in UTF-8
        "1.dat": True,
        "a1.dat": False,
        "bx": True,
        "dx": False,
        "by": True,
        "ay": False,
        "bad[": False,
        "trail\\": False,
        "trail": False,
        "#hash": True,
        "!bang": True,
        "spaced": True,
        "spaced   ": False,
        "kept ": True,
        "kept": False,
        "crlf": True,
        "# comment": False,
        "]z": True,
        "aw": False,
    }
    assert_matches(IgnoreRules(repo), repo, expected)


def test_a_symlinked_gitignore_is_not_read(repo: Path) -> None:
    write(repo, {"real-rules": "*.txt\n"})
    (repo / ".gitignore").symlink_to(repo / "real-rules")
    assert_matches(IgnoreRules(repo), repo, {"a.txt": False, "b/a.txt": False})


# Property: random trees and random ignore files, Git decides.

NAMES = ["a", "b", "ab", "a.x", "b.y", "ba"]
SEGMENTS = ["a", "b", "*", "?", "**", "a*", "*.x", "[ab]", "[!a]*", "b?", "\\a"]


@st.composite
def patterns(draw: st.DrawFn) -> str:
    segments = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3))
    return "".join(
        (
            "!" if draw(st.booleans()) else "",
            "/" if draw(st.booleans()) else "",
            "/".join(segments),
            "/" if draw(st.booleans()) else "",
        )
    )


@st.composite
def trees(draw: st.DrawFn) -> tuple[set[str], set[str]]:
    """(files, dirs): paths of up to three components; a prefix of another path is a dir."""
    raw = draw(
        st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3), min_size=1, max_size=10)
    )
    dirs = {"/".join(p[:i]) for p in raw for i in range(1, len(p))}
    files = {"/".join(p) for p in raw} - dirs
    return files, dirs


def all_paths(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if rel != ".git" and not rel.startswith(".git/"):
            found.append(rel)
    return sorted(found)


@settings(max_examples=examples(60), deadline=None)
@given(tree=trees(), data=st.data())
def test_agrees_with_git_check_ignore(
    tmp_path_factory: pytest.TempPathFactory, tree: tuple[set[str], set[str]], data: st.DataObject
) -> None:
    files, dirs = tree
    repo = init_repo(tmp_path_factory.mktemp("prop"))
    make_dirs(repo, *dirs)
    write(repo, dict.fromkeys(files, ""))
    places = sorted({"", *dirs, ".git/info/exclude"})
    chosen = data.draw(st.lists(st.sampled_from(places), min_size=1, max_size=3, unique=True))
    for place in chosen:
        lines = data.draw(st.lists(patterns(), min_size=1, max_size=4))
        target = place if place.endswith("exclude") else f"{place}/.gitignore".lstrip("/")
        write(repo, {target: "\n".join(lines) + "\n"})
    paths = all_paths(repo)
    rules = IgnoreRules(repo)
    assert {p for p in paths if rules.is_ignored(p)} == git_ignored(repo, paths)


@settings(max_examples=examples(30), deadline=None)
@given(tree=trees(), excludes=st.lists(patterns(), min_size=1, max_size=5))
def test_excludes_agree_with_git_check_ignore(
    tmp_path_factory: pytest.TempPathFactory, tree: tuple[set[str], set[str]], excludes: list[str]
) -> None:
    files, dirs = tree
    repo = init_repo(tmp_path_factory.mktemp("prop"))
    make_dirs(repo, *dirs)
    write(repo, dict.fromkeys(files, ""))
    write(repo.parent, {"excludes": "\n".join(excludes) + "\n"})
    paths = all_paths(repo)
    rules = IgnoreRules(repo, excludes=excludes)
    excludes_file = f"core.excludesFile={repo.parent / 'excludes'}"
    assert {p for p in paths if rules.is_ignored(p)} == git_ignored(
        repo, paths, "-c", excludes_file
    )
