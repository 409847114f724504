"""Which workspace paths the daemon ignores, with Git as the oracle.

A path is ignored when any of these holds:

* one of its components is ``.git`` (the repository, or the ``.git`` *file* of a worktree or
  submodule), at any depth;
* it lies in an internal directory (the daemon's state dir when that is inside the workspace);
* Git ignores it: ``.gitignore`` files at every level and ``$GIT_COMMON_DIR/info/exclude``
  (``core.excludesFile`` is not read);
* the user's ``exclude`` setting matches it (gitignore syntax, relative to the workspace root).
  These form a separate rule set: a ``!`` in a ``.gitignore`` cannot re-include what the user
  excluded, and a ``!`` in the setting cannot re-include what Git ignores.

The answer is meant to equal ``git check-ignore --no-index`` (tracked files are not special).
That needs Git's directory walk, which a whole-path matcher cannot give: Git checks each
directory on the way down against the rules known so far, stops at the first excluded one
(everything below is ignored, and ``.gitignore`` files below it are never read), and only then
matches the last component. At each step the rule that decides is the last matching line of
the deepest ``.gitignore``, then shallower files, then ``info/exclude``. ``pathspec``'s
``GitIgnoreSpec`` matches one path against one list with descendant-matching regexes, so its
verdicts cannot be stacked per directory; the patterns are therefore translated here, following
Git's ``wildmatch`` rules: matching is byte-wise (``?`` is one byte of UTF-8) and case-sensitive
(``core.ignorecase`` is not read), a ``**`` only spans directories next to ``/`` or at the start
of the pattern's wildcard part (so ``foo**/bar`` matches ``foo/x/y/bar``, as in Git), and a
pattern with an unterminated ``[`` or a trailing ``\\`` never matches.

Further Git behaviour kept: a ``.gitignore`` that is a symlink is not read; a directory-only
pattern (``build/``) matches a directory but not a symlink to one. Whether the last component
is a directory is asked of the file system (``lstat``) only when a directory-only pattern
decides, and the answer is cached while the path exists; a trailing ``/`` in the query says
"directory" without a look-up.

When the workspace is a sub-folder of a repository, the ``.gitignore`` files from the
repository's top down to the workspace root apply too, but the workspace root itself is never
ignored: the user opened it on purpose.

Speed: the rules in force for a directory are compiled into one regular expression (each
pattern one alternative, in precedence order, so the first alternative that matches is the
deciding line) and cached with that directory's verdict. A query is a few string operations,
two dictionary look-ups and two regex matches.

:meth:`IgnoreRules.is_ignored` reads the ignore files it needs; on the event loop,
:class:`mplp_lsp.ignore.judge.InOrderJudge` reads them in a thread first
(:meth:`IgnoreRules.unread`, :meth:`IgnoreRules.read`, :meth:`IgnoreRules.learn`).
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mplp_lsp.vcs.gitfile import find_git_dir

__all__ = ["IgnoreRules"]

# Bounds the memory of a long-running daemon; clearing only costs recomputation.
_MAX_CACHED_DIRS = 200_000
_MAX_CACHED_KINDS = 100_000

_SLASH = ord("/")
_STAR = ord("*")
_BACKSLASH = ord("\\")
_GLOB_SPECIAL = frozenset(b"*?[\\")
_ANY_DIRS = b"(?:.*/)?"


def _chars(spec: str) -> frozenset[int]:
    """Byte values of a class written as single characters and ``a-z`` style ranges."""
    out: set[int] = set()
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            out.update(range(ord(spec[i]), ord(spec[i + 2]) + 1))
            i += 3
        else:
            out.add(ord(spec[i]))
            i += 1
    return frozenset(out)


# Git's own ASCII-only ctype tables, not the C library's locale-dependent ones.
_CLASSES: dict[bytes, frozenset[int]] = {
    b"alnum": _chars("0-9A-Za-z"),
    b"alpha": _chars("A-Za-z"),
    b"blank": _chars(" \t"),
    b"cntrl": frozenset(range(0x20)) | {0x7F},
    b"digit": _chars("0-9"),
    b"graph": frozenset(range(0x21, 0x7F)),
    b"lower": _chars("a-z"),
    b"print": frozenset(range(0x20, 0x7F)),
    b"punct": _chars("!-/:-@[-`{-~"),
    b"space": _chars(" \t\n\r"),
    b"upper": _chars("A-Z"),
    b"xdigit": _chars("0-9A-Fa-f"),
}


def _char_class(members: frozenset[int]) -> bytes:
    if not members:
        return b"(?!)"
    parts: list[bytes] = []
    ordered = sorted(members)
    start = prev = ordered[0]
    for value in [*ordered[1:], -1]:
        if value == prev + 1:
            prev = value
            continue
        parts.append(b"\\x%02x" % start if start == prev else b"\\x%02x-\\x%02x" % (start, prev))
        start = prev = value
    return b"[" + b"".join(parts) + b"]"


def _bracket(pat: bytes, i: int) -> tuple[bytes | None, int]:
    """Translate a ``[...]`` whose ``[`` is at ``i - 1``; None when Git would never match."""
    n = len(pat)
    negated = i < n and pat[i] in b"!^"
    if negated:
        i += 1
    members: set[int] = set()
    prev = 0  # the previous single member, which may start a range; 0 = none
    first = True
    while True:
        if i >= n:
            return None, i
        c = pat[i]
        if c == ord("]") and not first:
            break
        first = False
        if c == _BACKSLASH:
            i += 1
            if i >= n:
                return None, i
            members.add(pat[i])
            prev = pat[i]
        elif c == ord("-") and prev and i + 1 < n and pat[i + 1] != ord("]"):
            i += 1
            if pat[i] == _BACKSLASH:
                i += 1
                if i >= n:
                    return None, i
            members.update(range(prev, pat[i] + 1))
            prev = 0
        elif c == ord("[") and i + 1 < n and pat[i + 1] == ord(":"):
            close = pat.find(b"]", i + 2)
            if close == -1:
                return None, i
            if close - 1 < i + 2 or pat[close - 1] != ord(":"):
                # Not a "[:name:]": Git takes the "[" as a plain member and goes on at ":".
                members.add(c)
                prev = c
            else:
                named = _CLASSES.get(pat[i + 2 : close - 1])
                if named is None:
                    return None, i
                members |= named
                prev = 0
                i = close
        else:
            members.add(c)
            prev = c
        i += 1
    allowed = frozenset(range(256)) - members if negated else frozenset(members)
    return _char_class(allowed - {_SLASH}), i + 1


def _glob(pat: bytes, *, pathname: bool, start: int) -> bytes | None:
    """Regex source for ``pat`` under Git's wildmatch; None when it can never match.

    ``pathname``: the pattern contains a slash, so ``**`` may span directories. ``start`` is where
    Git begins wildmatch after comparing the literal prefix, which counts as a segment start.
    """
    out: list[bytes] = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        if c == _BACKSLASH:
            if i + 1 == n:
                return None
            out.append(re.escape(pat[i + 1 : i + 2]))
            i += 2
        elif c == ord("?"):
            out.append(b"[^/]")
            i += 1
        elif c == _STAR:
            j = i
            while j < n and pat[j] == _STAR:
                j += 1
            spans = (
                pathname
                and j - i >= 2
                and (i == start or pat[i - 1] == _SLASH)
                and (j == n or pat[j] == _SLASH or pat[j : j + 2] == b"\\/")
            )
            if spans and j < n and pat[j] == _SLASH:
                # "**/**/" means "**/"; emitting both would make failed matches backtrack
                # polynomially in the path depth.
                if not out or out[-1] != _ANY_DIRS:
                    out.append(_ANY_DIRS)
                j += 1
            else:
                out.append(b".*" if spans else b"[^/]*")
            i = j
        elif c == ord("["):
            member, i = _bracket(pat, i + 1)
            if member is None:
                return None
            out.append(member)
        else:
            out.append(re.escape(pat[i : i + 1]))
            i += 1
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class _Rule:
    regex: bytes  # matches the whole path (relative to the repository top) it applies to
    negative: bool
    dir_only: bool


def _trim_trailing_spaces(line: bytes) -> bytes:
    last_space = -1
    i = 0
    while i < len(line):
        c = line[i]
        if c == ord(" "):
            if last_space < 0:
                last_space = i
        elif c == _BACKSLASH:
            i += 1
            if i >= len(line):
                return line
            last_space = -1
        else:
            last_space = -1
        i += 1
    return line[:last_space] if last_space >= 0 else line


def _parse(line: bytes, base: str) -> _Rule | None:
    negative = line.startswith(b"!")
    if negative:
        line = line[1:]
    dir_only = line.endswith(b"/")
    if dir_only:
        line = line[:-1]
    pathname = b"/" in line
    line = line.removeprefix(b"/")
    if not line:
        return None
    lead = re.escape(f"{base}/".encode("utf-8", "surrogateescape")) if base else b""
    if pathname:
        literal = next((k for k, c in enumerate(line) if c in _GLOB_SPECIAL), len(line))
        glob = _glob(line, pathname=True, start=literal)
    else:
        # No slash: matched against the last component, at any depth below the file's dir.
        lead += _ANY_DIRS
        glob = _glob(line, pathname=False, start=0)
    return None if glob is None else _Rule(lead + glob, negative, dir_only)


def _rules(lines: Iterable[bytes], base: str) -> list[_Rule]:
    rules: list[_Rule] = []
    for raw in lines:
        if not raw or raw.startswith(b"#"):
            continue
        rule = _parse(_trim_trailing_spaces(raw.removesuffix(b"\r")), base)
        if rule is not None:
            rules.append(rule)
    return rules


def _read_rules(path: Path, base: str, *, follow: bool) -> list[_Rule]:
    """The rules of one ignore file, in file order; a missing or unreadable file has none."""
    try:
        if not follow and not stat.S_ISREG(path.lstat().st_mode):
            return []
        data = path.read_bytes()
    except OSError:
        return []
    return _rules(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), base)


class _Stack:
    """The rules in force below one directory, highest precedence first."""

    __slots__ = ("_any", "_any_rules", "_files", "_files_rules", "rules")

    def __init__(self, rules: Sequence[_Rule]) -> None:
        self.rules = tuple(rules)
        self._any, self._any_rules = _combine(self.rules)
        self._files, self._files_rules = _combine([r for r in self.rules if not r.dir_only])

    def push(self, level: Sequence[_Rule]) -> _Stack:
        """The stack below a directory whose ignore file holds ``level`` (in file order)."""
        return _Stack([*reversed(level), *self.rules]) if level else self

    def verdict(self, path: bytes, is_dir: bool | None) -> bool | None:
        """Ignored or not; None when that depends on whether ``path`` is a directory."""
        if self._any is None:
            return False
        found = self._any.fullmatch(path)
        if found is None:
            return False
        rule = self._any_rules[(found.lastindex or 1) - 1]
        if not rule.dir_only or is_dir:
            return not rule.negative
        if is_dir is None:
            return None
        found = self._files.fullmatch(path) if self._files is not None else None
        return found is not None and not self._files_rules[(found.lastindex or 1) - 1].negative


def _combine(rules: Sequence[_Rule]) -> tuple[re.Pattern[bytes] | None, tuple[_Rule, ...]]:
    """One regex whose first matching alternative is the deciding rule (group k: rules[k-1])."""
    if not rules:
        return None, ()
    source = b"|".join(b"(" + rule.regex + b")" for rule in rules)
    return re.compile(source, re.DOTALL), tuple(rules)


class _Layer:
    """An independent rule set, walked directory by directory like Git walks a path."""

    def __init__(
        self, prefix: str, initial: Callable[[], _Stack], load: Callable[[str], list[_Rule]]
    ) -> None:
        self.prefix = prefix.encode("utf-8", "surrogateescape")
        self._initial = initial
        self._load = load
        self._dirs: dict[str, _Stack | None] = {"": initial()}
        self.generation = 0  # changes whenever cached rules are forgotten

    def stack(self, directory: str, read: _Read | None = None) -> _Stack | None:
        """Rules in force below ``directory`` (workspace-relative); None if it is excluded.
        Ignore files not cached are taken from ``read``, else read now."""
        try:
            return self._dirs[directory]
        except KeyError:
            pass
        if len(self._dirs) >= _MAX_CACHED_DIRS:
            self.forget("")
        if "" not in self._dirs:
            initial = read.initial if read is not None else None
            self._dirs[""] = initial if initial is not None else self._initial()
        pending = self.unread(directory)
        state = self._dirs[pending[-1].rpartition("/")[0]] if pending else self._dirs[directory]
        for child in reversed(pending):
            if state is not None:
                path = self.prefix + child.encode("utf-8", "surrogateescape")
                if state.verdict(path, True):
                    state = None
                else:
                    level = read.levels.get(child) if read is not None else None
                    state = state.push(self._load(child) if level is None else level)
            self._dirs[child] = state
        return state

    def unread(self, directory: str) -> list[str]:
        """``directory`` and its ancestors whose rules are not cached, deepest first ("" is
        the root, cached unless forgotten)."""
        pending = []
        while directory not in self._dirs:
            pending.append(directory)
            if not directory:
                break
            directory = directory.rpartition("/")[0]
        return pending

    def forget(self, directory: str) -> None:
        self.generation += 1
        if not directory:
            self._dirs = {}  # the root's files are read again when next needed
            return
        below = directory + "/"
        for key in [k for k in self._dirs if k == directory or k.startswith(below)]:
            del self._dirs[key]


@dataclass
class _Read:
    """Ignore files read (in a thread) for :meth:`IgnoreRules.learn`."""

    generation: int
    initial: _Stack | None = None
    levels: dict[str, list[_Rule]] = field(default_factory=dict)
    kinds: dict[str, bool] = field(default_factory=dict)


def _common_dir(git_dir: Path) -> Path:
    """Where ``info/exclude`` lives: a linked worktree's git dir names it in ``commondir``."""
    try:
        named = Path((git_dir / "commondir").read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        return git_dir
    return named if named.is_absolute() else git_dir / named


def _find_repository(root: Path) -> tuple[Path, Path | None]:
    """The repository top holding ``root`` and its common git dir; ``(root, None)`` if none."""
    found = find_git_dir(root)
    if found is None:
        return root, None
    top, git_dir = found
    return top, None if git_dir is None else _common_dir(git_dir)


class IgnoreRules:
    """Decides which workspace paths produce no events (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        excludes: Sequence[str] = (),
        internal_dirs: Sequence[Path] = (),
    ) -> None:
        self._root = root
        top, common_dir = _find_repository(root)
        self._top = top
        inner = root.relative_to(top).as_posix()
        self._top_prefix = "" if inner == "." else inner + "/"
        self._exclude_file = None if common_dir is None else common_dir / "info" / "exclude"
        internal: list[str] = []
        for directory in internal_dirs:
            try:
                relative = directory.resolve().relative_to(root).as_posix()
            except ValueError:
                continue
            internal.append("/" if relative == "." else f"/{relative}/")
        self._internal = tuple(internal)
        self._kinds: dict[str, bool] = {}
        self._git = _Layer(self._top_prefix, self._git_initial, self._git_load)
        self._excludes = _excludes_layer(excludes)

    def is_ignored(self, relpath: str) -> bool:
        """Whether a workspace-relative POSIX path (file or directory) is ignored.

        A trailing ``/`` marks a directory; otherwise the file system is asked, only if needed.
        """
        is_dir: bool | None = True if relpath.endswith("/") else None
        rel = relpath.strip("/")
        fixed = self._fixed_verdict(rel)
        if fixed is not None:
            return fixed
        parent = rel.rpartition("/")[0]
        encoded = rel.encode("utf-8", "surrogateescape")
        for layer in (self._excludes, self._git):
            rules = layer.stack(parent)
            if rules is None:
                return True
            path = layer.prefix + encoded
            verdict = rules.verdict(path, is_dir)
            if verdict is None:
                is_dir = self._is_dir(rel)
                verdict = rules.verdict(path, is_dir)
            if verdict:
                return True
        return False

    def ignored_many(self) -> Callable[[str], bool]:
        """:meth:`is_ignored` for the paths of a batch judged at once, while the rules stay as
        they are: each directory's rules are looked up once (:meth:`files_in`)."""
        directories: dict[str, bool | Callable[[str], bool]] = {}

        def ignored(relpath: str) -> bool:
            rel = relpath.strip("/")
            fixed = self._fixed_verdict(rel)
            if fixed is not None or relpath.endswith("/"):
                return self.is_ignored(relpath) if fixed is None else fixed
            directory, _, name = rel.rpartition("/")
            judge = directories.get(directory)
            if judge is None:
                judge = directories[directory] = self.files_in(directory)
            return judge if isinstance(judge, bool) else judge(name)

        return ignored

    def files_in(self, directory: str) -> bool | Callable[[str], bool]:
        """For judging many files of one directory (a drift scan): True when the whole
        directory is ignored, else a function of a file *name* in it. The directory's rules
        are looked up once instead of per file; each name costs one match per rule set."""
        rel = directory.strip("/")
        framed = f"/{rel}/" if rel else "/"
        if rel and ("/.git/" in framed or framed.startswith(self._internal)):
            return True
        base = rel + "/" if rel else ""
        stacks = []
        for layer in (self._excludes, self._git):
            rules = layer.stack(rel)
            if rules is None:
                return True
            stacks.append((rules, layer.prefix + base.encode("utf-8", "surrogateescape")))

        def ignored(name: str) -> bool:
            if name == ".git":
                return True
            encoded = name.encode("utf-8", "surrogateescape")
            for rules, prefix in stacks:
                verdict = rules.verdict(prefix + encoded, None)
                if verdict is None:
                    verdict = rules.verdict(prefix + encoded, self._is_dir(base + name))
                if verdict:
                    return True
            return False

        return ignored

    def unread(self, relpath: str) -> list[str]:
        """The directories whose ignore files judging ``relpath`` would read (none: judging
        it touches no file but, for a directory-only pattern, one ``lstat``)."""
        rel = relpath.strip("/")
        if self._fixed_verdict(rel) is not None:
            return []
        return self._git.unread(rel.rpartition("/")[0])

    def _fixed_verdict(self, rel: str) -> bool | None:
        """The verdict that needs no rules: the root, ``.git`` and internal directories."""
        if not rel or rel == ".":
            return False
        framed = f"/{rel}/"
        if "/.git/" in framed or framed.startswith(self._internal):
            return True
        return None

    def read(self, relpaths: Iterable[str]) -> _Read:
        """Read what judging ``relpaths`` needs, touching no cache (safe in a thread)."""
        read = _Read(self._git.generation)
        for relpath in relpaths:
            rel = relpath.strip("/")
            for directory in self._git.unread(rel.rpartition("/")[0]):
                if not directory:
                    read.initial = self._git_initial()
                elif directory not in read.levels:
                    read.levels[directory] = self._git_load(directory)
            if rel and not relpath.endswith("/"):
                with contextlib.suppress(OSError):  # a path that is gone is not cached
                    read.kinds[rel] = stat.S_ISDIR(os.lstat(self._root / rel).st_mode)
        return read

    def learn(self, read: _Read) -> bool:
        """Cache what :meth:`read` found; False (nothing cached) if rules were forgotten since."""
        if read.generation != self._git.generation:
            return False
        for directory in sorted(read.levels, key=len, reverse=True):
            self._git.stack(directory, read)
        if read.initial is not None:
            self._git.stack("", read)
        if len(self._kinds) + len(read.kinds) >= _MAX_CACHED_KINDS:
            self._kinds.clear()
        self._kinds.update(read.kinds)
        return True

    def invalidate(self, relpath: str) -> None:
        """Forget what an ignore file said: pass the changed ``.gitignore``, ``.git/info/exclude``
        or a directory whose ``.gitignore`` changed; ``""`` re-reads everything."""
        rel = relpath.strip("/")
        head, _, name = rel.rpartition("/")
        if rel.partition("/")[0] == ".git":
            rel = ""
        elif name == ".gitignore":
            rel = head
        self._git.forget(rel)

    def with_excludes(self, excludes: Sequence[str]) -> IgnoreRules:
        """The same rules with other user excludes (Git's cached rules are shared)."""
        clone = copy.copy(self)
        clone._excludes = _excludes_layer(excludes)
        return clone

    def _is_dir(self, rel: str) -> bool:
        known = self._kinds.get(rel)
        if known is not None:
            return known
        try:
            mode = os.lstat(self._root / rel).st_mode
        except OSError:
            return False  # not cached: it may appear later as either kind
        if len(self._kinds) >= _MAX_CACHED_KINDS:
            self._kinds.clear()
        self._kinds[rel] = known = stat.S_ISDIR(mode)
        return known

    def _git_initial(self) -> _Stack:
        rules: list[_Rule] = []
        if self._exclude_file is not None:
            rules = _read_rules(self._exclude_file, "", follow=True)
        stack = _Stack(list(reversed(rules)))
        # Ignore files from the repository top down to the workspace root.
        directory, base = self._top, ""
        stack = stack.push(_read_rules(directory / ".gitignore", base, follow=False))
        for part in self._top_prefix.split("/")[:-1]:
            directory, base = directory / part, f"{base}/{part}".lstrip("/")
            stack = stack.push(_read_rules(directory / ".gitignore", base, follow=False))
        return stack

    def _git_load(self, directory: str) -> list[_Rule]:
        return _read_rules(
            self._root / directory / ".gitignore", self._top_prefix + directory, follow=False
        )


def _excludes_layer(excludes: Sequence[str]) -> _Layer:
    rules = _rules((line.encode("utf-8", "surrogateescape") for line in excludes), "")
    stack = _Stack(list(reversed(rules)))
    return _Layer("", lambda: stack, lambda _directory: [])
