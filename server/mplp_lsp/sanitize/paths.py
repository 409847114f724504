"""Turn untrusted path input into a workspace-relative POSIX path, or refuse it.

Every event source (editor notifications, file watcher, git, CLI, loopback HTTP) passes the paths
it receives through :func:`relative_path` before anything is stored or forwarded. The result is
``(root, relpath)``; a refusal is a :class:`PathRejected` carrying one stable :class:`ErrorCode`.

Decisions, each covered by a test:

* Accepted forms: absolute POSIX paths, paths relative to the *first* root, and ``file:`` URIs
  (RFC 8089: ``file:///x``, ``file://localhost/x`` and ``file:/x``; percent-decoded as UTF-8).
  Any other scheme, or a ``file:`` URI naming another host, is ``UNSUPPORTED_URI``. A relative
  path whose first component contains ``:`` (``notes:v2.txt``) reads as a URI; spell it
  ``./notes:v2.txt``. There is no ``~`` expansion.
* Windows forms are not paths on POSIX. Drive letters (``C:\\x``, ``C:/x``, drive-relative
  ``C:x``, ``file:///C:/x``) and UNC names (``\\\\server\\share``) can never lie inside a
  POSIX workspace, so they are ``PATH_OUTSIDE_WORKSPACE``. A *relative* path containing ``\\``
  (``src\\app.py``) is ``PATH_INVALID`` with a hint to use forward slashes: it is not
  converted, because ``\\`` is a legal file-name character on POSIX and guessing would report
  the wrong file. Absolute paths and URIs may contain ``\\`` as an ordinary character.
* ``..`` is applied lexically before anything touches the file system. In a relative path, a
  ``..`` that climbs above the first root is ``PATH_TRAVERSAL`` (``a/../b`` is fine and becomes
  ``b``). An absolute path or URI with ``..`` that ends outside every root is ``PATH_TRAVERSAL``
  too; without ``..`` it is ``PATH_OUTSIDE_WORKSPACE``. In a plain (non-URI) path,
  percent-escapes that decode to a ``..`` component (``%2e%2e``) are ``PATH_TRAVERSAL`` as well:
  no real file is named like that, and a later decoding step would turn it into a parent step.
* Symlinks are followed like ``realpath`` does, with the kernel's limit of 40 links per lookup
  (more, or a cycle, is ``PATH_SYMLINK_LOOP``). A path that resolves outside every root while
  its lexical form or one of its resolved parents was inside is ``PATH_SYMLINK_ESCAPE``. The
  returned ``relpath`` is the *resolved* location, so a link inside the workspace that points
  elsewhere inside reports the target's path, and ``root`` is the deepest root containing it.
  With ``follow_leaf=False`` (a watcher's report names a directory entry, not what it points
  to) the last component is kept as it is when it is a link: the parents are still resolved,
  and the link itself is then judged by ``lstat`` (it is never a file event).
* A path that does not exist (deleted files are reported too) resolves its deepest existing
  parent and keeps the rest as written; ``must_exist=True`` makes it ``PATH_INVALID``.
* NUL, C0/C1 controls and DEL, before or after percent-decoding, are
  ``PATH_CONTROL_CHARACTER``; bytes that are not UTF-8 and strings holding lone surrogates
  (``os.fsdecode`` output for such bytes) are ``PATH_NOT_UTF8``. The resolved relpath is checked
  again because a symlink target can introduce either.
* File-system errors other than "does not exist" (permission denied on a parent, name too long)
  become ``PATH_INVALID``; no other exception escapes for bad input.

Speed: roots are resolved once by :func:`resolve_roots` and trusted afterwards, so a path under a
root costs one ``lstat`` per component below that root (a few microseconds). This assumes the
roots themselves are not swapped for symlinks while the daemon runs; re-run :func:`resolve_roots`
when the workspace folders change.

Messages never echo the input: it is untrusted and may end up in logs.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, unquote_to_bytes

from mplp_lsp.protocol.json_input import has_utf8_form
from mplp_lsp.protocol.result import ErrorCode, ValidationResult

__all__ = [
    "PathRejected",
    "check_name",
    "is_inside",
    "relative_path",
    "relative_paths",
    "resolve_roots",
]

# Linux MAXSYMLINKS: the kernel gives up with ELOOP after this many links in one lookup.
_MAX_SYMLINKS = 40
# Longer than PATH_MAX even when every byte is percent-encoded; refusing early bounds the work
# an oversized event can cause.
_MAX_INPUT_CHARS = 3 * 4096

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# Two or more characters, so a drive letter (``C:``) never reads as a scheme.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:")
_DRIVE = re.compile(r"[A-Za-z]:")
# RFC 8089 appendix E.2: ``file:///C:/x`` and the legacy ``file:///C|/x``.
_URI_DRIVE = re.compile(r"/[A-Za-z][:|](?:/|$)")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
# A last name that reads the same in a path and in a URI, and that no rule looks into: no
# escape, separator, scheme or drive colon, query or fragment, control or non-ASCII character.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.~+=,@-]+")


class PathRejected(Exception):
    """Untrusted path input that cannot be mapped into the workspace."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def to_result(self, path_field: str = "file_path") -> ValidationResult:
        return ValidationResult.single(path_field, self.code, self.message)


def resolve_roots(paths: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    """Resolve workspace roots once, keeping their order and dropping duplicates.

    Roots must be absolute; a relative root would silently depend on the daemon's working
    directory, so it is a programming error (``ValueError``), not rejected input.
    """
    resolved: dict[Path, None] = {}
    for item in paths:
        path = Path(item)
        if not path.is_absolute():
            raise ValueError("workspace roots must be absolute paths")
        resolved[Path(os.path.realpath(path))] = None
    return tuple(resolved)


DirectoryCache = dict[str, tuple[bool, str | None]]
"""What :func:`_inspect` found for each directory on the way, for one batch of paths."""


def is_inside(path: Path, root: Path) -> bool:
    """Lexical containment (``path`` equal to or below ``root``); both must be normalised."""
    return _contains(str(root), str(path))


def relative_path(
    raw: str | bytes | os.PathLike[str],
    roots: Sequence[Path],
    *,
    must_exist: bool = False,
    directories: DirectoryCache | None = None,
    follow_leaf: bool = True,
) -> tuple[Path, str]:
    """Map ``raw`` to ``(root, relpath)`` or raise :class:`PathRejected`.

    ``roots`` must be absolute and already resolved (see :func:`resolve_roots`); relative input
    is taken relative to ``roots[0]``. See the module docstring for every rule. A
    ``directories`` cache shared by the calls for one batch of paths inspects each parent
    directory once for the whole batch; the leaf is always inspected.
    """
    if not roots:
        raise PathRejected(ErrorCode.PATH_OUTSIDE_WORKSPACE, "no workspace root is configured")
    root_strs = [str(root) for root in roots]
    text = _as_text(raw)
    parts, absolute, had_dotdot = _lexical_parts(_posix_form(text))
    base = _deepest(root_strs, "/" + "/".join(parts)) if absolute else 0
    # The leaf is inspected to follow it when it is a link, or to know that it exists.
    leaf = follow_leaf or must_exist
    if base is None:
        real, exists = _resolve("/", parts, directories, leaf)
    else:
        start = len(_split(root_strs[base])) if absolute else 0
        real, exists = _resolve(root_strs[base], parts[start:], directories, leaf)
    found = _deepest(root_strs, real)
    if found is None:
        raise _why_outside(parts, had_dotdot, lexically_inside=base is not None, roots=root_strs)
    if must_exist and not exists:
        raise PathRejected(ErrorCode.PATH_INVALID, "the path does not exist")
    relpath = real[len(root_strs[found]) :].lstrip("/")
    if not relpath:
        raise PathRejected(ErrorCode.PATH_INVALID, "the workspace root itself is not a file path")
    _check_characters(relpath)
    return roots[found], relpath


def relative_paths(
    raws: Sequence[str], roots: Sequence[Path], *, follow_leaf: bool = True
) -> list[tuple[Path, str] | PathRejected]:
    """:func:`relative_path` of each of ``raws`` (its result, or the refusal it raises), with
    the work shared by the paths of one parent: a watcher's burst names thousands of files
    in a few directories.

    A path whose last name is plain (:data:`_PLAIN_NAME`, not ``.`` or ``..``) and whose leaf
    is not followed is its parent's resolved location plus that name, so each parent (the
    text before the last ``/``) is parsed and resolved once for the batch. Anything else,
    and every refusal, goes through :func:`relative_path` itself, so the outcomes are the
    same (a property test compares them). Like a ``directories`` cache, the result holds for
    one synchronous batch: a link changed meanwhile is seen by the next one.
    """
    if not roots:
        return [_outcome(raw, roots, None, follow_leaf) for raw in raws]
    root_strs = [str(root) for root in roots]
    directories: DirectoryCache = {}
    parents: dict[str, str | None] = {}
    out: list[tuple[Path, str] | PathRejected] = []
    for raw in raws:
        head, _, name = raw.rpartition("/")
        plain = (
            not follow_leaf
            and len(raw) <= _MAX_INPUT_CHARS
            and _PLAIN_NAME.fullmatch(name) is not None
            and name not in (".", "..")
        )
        if plain:
            if head not in parents:
                parents[head] = _real_parent(head, root_strs, directories)
            parent = parents[head]
            if parent is not None:
                real = parent + name if parent.endswith("/") else f"{parent}/{name}"
                found = _deepest(root_strs, real)
                if found is not None:
                    relpath = real[len(root_strs[found]) :].lstrip("/")
                    if relpath:  # its characters: the parent's were checked, the name's are
                        out.append((roots[found], relpath))
                        continue
        out.append(_outcome(raw, roots, directories, follow_leaf))
    return out


def _outcome(
    raw: str, roots: Sequence[Path], directories: DirectoryCache | None, follow_leaf: bool
) -> tuple[Path, str] | PathRejected:
    try:
        return relative_path(raw, roots, directories=directories, follow_leaf=follow_leaf)
    except PathRejected as rejected:
        return rejected


def _real_parent(head: str, roots: Sequence[str], directories: DirectoryCache) -> str | None:
    """Where the absolute parent ``head`` (a path or ``file:`` URI) resolves, every name of it
    followed as :func:`relative_path` follows a path's directories; None when it is not
    plainly inside a root (its paths then take the long way, and are refused there)."""
    try:
        parts, absolute, _ = _lexical_parts(_posix_form(_as_text(head)))
        base = _deepest(roots, "/" + "/".join(parts)) if absolute else None
        if base is None:
            return None
        start = len(_split(roots[base]))
        real, _ = _resolve(roots[base], [*parts[start:], "."], directories, True)
        _check_characters(real)
    except PathRejected:
        return None
    return real


def check_name(relpath: str) -> None:
    """Raise :class:`PathRejected` for a name listed from the disk that cannot be a
    ``file_path`` (not UTF-8, a control character); its directories need no resolving."""
    _check_characters(relpath)


def _as_text(raw: str | bytes | os.PathLike[str]) -> str:
    try:
        value = os.fspath(raw)
    except TypeError:
        raise PathRejected(ErrorCode.PATH_INVALID, "a path must be a string") from None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise PathRejected(ErrorCode.PATH_NOT_UTF8, "the path is not valid UTF-8") from None
    if not value:
        raise PathRejected(ErrorCode.PATH_INVALID, "the path is empty")
    if len(value) > _MAX_INPUT_CHARS:
        raise PathRejected(ErrorCode.PATH_INVALID, "the path is too long")
    _check_characters(value)
    return value


def _check_characters(value: str) -> None:
    if not has_utf8_form(value):
        # Lone surrogates: what os.fsdecode makes of bytes that are not UTF-8.
        raise PathRejected(ErrorCode.PATH_NOT_UTF8, "the path is not valid UTF-8")
    if _CONTROL.search(value):
        raise PathRejected(
            ErrorCode.PATH_CONTROL_CHARACTER, "the path contains a control character or NUL"
        )


def _posix_form(text: str) -> str:
    if text.startswith("\\\\") or _DRIVE.match(text):
        raise PathRejected(
            ErrorCode.PATH_OUTSIDE_WORKSPACE,
            "Windows drive and UNC paths cannot lie inside a POSIX workspace",
        )
    if _SCHEME.match(text):
        path = _file_uri_path(text)
        _check_characters(path)
        return path
    if not text.startswith("/") and "\\" in text:
        raise PathRejected(
            ErrorCode.PATH_INVALID,
            "backslash in a relative path: use forward slashes as the separator",
        )
    if "%" in text and ".." in unquote(text).split("/"):
        raise PathRejected(ErrorCode.PATH_TRAVERSAL, "percent-encoded '..' component in the path")
    return text


def _file_uri_path(uri: str) -> str:
    scheme, _, rest = uri.partition(":")
    if scheme.lower() != "file":
        raise PathRejected(ErrorCode.UNSUPPORTED_URI, "only file: URIs are accepted")
    if "?" in rest or "#" in rest:
        raise PathRejected(ErrorCode.PATH_INVALID, "a file URI must not carry a query or fragment")
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        if authority.lower() not in ("", "localhost"):
            raise PathRejected(ErrorCode.UNSUPPORTED_URI, "file URIs naming a host are not local")
        path = "/" + path
    elif rest.startswith("/"):
        path = rest
    else:
        raise PathRejected(ErrorCode.PATH_INVALID, "a file URI needs an absolute path")
    if _BAD_ESCAPE.search(path):
        raise PathRejected(ErrorCode.PATH_INVALID, "malformed percent-escape in the file URI")
    try:
        decoded = unquote_to_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        raise PathRejected(ErrorCode.PATH_NOT_UTF8, "the URI does not decode to UTF-8") from None
    if _URI_DRIVE.match(decoded):
        raise PathRejected(
            ErrorCode.PATH_OUTSIDE_WORKSPACE,
            "Windows drive paths cannot lie inside a POSIX workspace",
        )
    return decoded


def _split(path: str) -> list[str]:
    return [part for part in path.split("/") if part and part != "."]


def _lexical_parts(path: str) -> tuple[list[str], bool, bool]:
    """Apply ``.`` and ``..`` lexically: (components, is absolute, had a ``..``)."""
    absolute = path.startswith("/")
    stack: list[str] = []
    had_dotdot = False
    for part in _split(path):
        if part != "..":
            stack.append(part)
            continue
        had_dotdot = True
        if stack:
            stack.pop()
        elif not absolute:
            raise PathRejected(ErrorCode.PATH_TRAVERSAL, "'..' climbs above the workspace root")
    return stack, absolute, had_dotdot


def _contains(root: str, path: str) -> bool:
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


def _deepest(roots: Sequence[str], path: str) -> int | None:
    best: int | None = None
    for index, root in enumerate(roots):
        if _contains(root, path) and (best is None or len(root) > len(roots[best])):
            best = index
    return best


def _resolve(
    base: str,
    parts: Sequence[str],
    directories: DirectoryCache | None = None,
    follow_leaf: bool = True,
) -> tuple[str, bool]:
    """Follow ``parts`` from the real directory ``base``: (real path, whether it exists).

    Below the first missing component nothing can be a link, so the rest is kept as written,
    which is how a deleted file still gets its workspace location. Without ``follow_leaf``
    the leaf is not inspected at all (a watcher's report names the entry, link or not; a
    20,000-path burst saves 20,000 ``lstat`` calls): whether it exists is then not known.
    """
    path = base
    pending = list(reversed(parts))
    exists = True
    links = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            path = posixpath.dirname(path)
            continue
        candidate = path + name if path.endswith("/") else path + "/" + name
        if not exists or (not pending and not follow_leaf):
            path = candidate
            continue
        if directories is None or not pending:
            exists, target = _inspect(candidate)
        else:
            found = directories.get(candidate)
            if found is None:
                found = directories[candidate] = _inspect(candidate)
            exists, target = found
        if target is None:
            path = candidate
            continue
        links += 1
        if links > _MAX_SYMLINKS:
            raise PathRejected(ErrorCode.PATH_SYMLINK_LOOP, "symbolic link loop in the path")
        if target.startswith("/"):
            path = "/"
        pending.extend(reversed(target.split("/")))
    return path, exists


def _inspect(path: str) -> tuple[bool, str | None]:
    """(exists, link target or None) with a single ``lstat`` for the common non-link case."""
    # Plain str and os calls: a Path object per component would cost more than the syscall.
    try:
        mode = os.lstat(path).st_mode
        return True, (os.readlink(path) if stat.S_ISLNK(mode) else None)  # noqa: PTH115
    except (FileNotFoundError, NotADirectoryError):
        return False, None
    except OSError as exc:
        raise _os_error(exc) from None


def _os_error(exc: OSError) -> PathRejected:
    if exc.errno == errno.ELOOP:
        return PathRejected(ErrorCode.PATH_SYMLINK_LOOP, "symbolic link loop in the path")
    reason = os.strerror(exc.errno) if exc.errno else type(exc).__name__
    return PathRejected(ErrorCode.PATH_INVALID, f"the path cannot be inspected: {reason}")


def _why_outside(
    parts: Sequence[str], had_dotdot: bool, *, lexically_inside: bool, roots: Sequence[str]
) -> PathRejected:
    if lexically_inside:
        return _symlink_escape()
    if had_dotdot:
        return PathRejected(ErrorCode.PATH_TRAVERSAL, "'..' leads out of the workspace")
    if _entered_workspace(parts, roots):
        return _symlink_escape()
    return PathRejected(ErrorCode.PATH_OUTSIDE_WORKSPACE, "the path is outside the workspace")


def _symlink_escape() -> PathRejected:
    return PathRejected(ErrorCode.PATH_SYMLINK_ESCAPE, "a symbolic link leads out of the workspace")


def _entered_workspace(parts: Sequence[str], roots: Sequence[str]) -> bool:
    """Whether some resolved parent lies in a root (the root was reached through a link).

    Only runs for rejected input, so the repeated resolution does not matter.
    """
    path = "/"
    for part in parts:
        path, exists = _resolve(path, [part])
        if _deepest(roots, path) is not None:
            return True
        if not exists:
            return False
    return False
