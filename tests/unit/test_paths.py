"""Path sanitisation against real files, links and permissions in a temporary workspace."""

from __future__ import annotations

import errno
import os
import posixpath
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.protocol.result import ErrorCode
from mplp_lsp.sanitize import paths
from mplp_lsp.sanitize.paths import PathRejected, is_inside, relative_path, resolve_roots

NON_UTF8_NAME = b"caf\xe9.txt"


def _code(raw: object, roots: tuple[Path, ...], **kwargs: bool) -> ErrorCode:
    with pytest.raises(PathRejected) as caught:
        relative_path(raw, roots, **kwargs)  # type: ignore[arg-type]
    return caught.value.code


def _build(base: Path) -> tuple[Path, Path]:
    """A workspace with inside and outside links, a link loop and a non-UTF-8 name."""
    ws = base / "ws"
    outside = base / "outside"
    (ws / "src" / "pkg").mkdir(parents=True)
    outside.mkdir()
    (ws / "src" / "app.py").write_text("print()\n")
    (ws / "src" / "pkg" / "mod.py").write_text("")
    (ws / "docs").mkdir()
    (ws / "docs" / "my notes é.md").write_text("")
    (outside / "secret.txt").write_text("top secret\n")
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "leakdir").symlink_to(outside, target_is_directory=True)
    (ws / "dangling").symlink_to(outside / "not-there.txt")
    (ws / "alias.py").symlink_to("src/app.py")
    (ws / "srclink").symlink_to("src", target_is_directory=True)
    (ws / "rootlink").symlink_to(".", target_is_directory=True)
    (ws / "loop_a").symlink_to("loop_b")
    (ws / "loop_b").symlink_to("loop_a")
    (ws / "self").symlink_to("self")
    fd = os.open(os.fsencode(ws) + b"/" + NON_UTF8_NAME, os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)
    (ws / "bad_target").symlink_to(os.fsdecode(NON_UTF8_NAME))
    (ws / "a\\b.txt").write_text("")
    # The workspace seen through a link, as when $HOME sits behind a symlink.
    (base / "alias_ws").symlink_to(ws, target_is_directory=True)
    return ws, outside


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return _build(tmp_path)[0]


@pytest.fixture
def roots(ws: Path) -> tuple[Path, ...]:
    return resolve_roots([ws])


@pytest.fixture
def root(roots: tuple[Path, ...]) -> Path:
    return roots[0]


# -- accepted input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("src/app.py", "src/app.py"),
        ("./src/app.py", "src/app.py"),
        ("src//pkg/./mod.py", "src/pkg/mod.py"),
        ("src/pkg/../app.py", "src/app.py"),
        ("a/../b", "b"),
        ("src/gone.py", "src/gone.py"),  # deleted files are reported too
        ("new/dir/file.py", "new/dir/file.py"),
        ("docs/my notes é.md", "docs/my notes é.md"),
        (b"src/app.py", "src/app.py"),
        (Path("src/app.py"), "src/app.py"),
        ("./notes:v2.txt", "notes:v2.txt"),
        ("~/x", "~/x"),  # no home expansion: a directory named "~"
    ],
)
def test_relative_input(raw: str | bytes | Path, expected: str, roots: tuple[Path, ...]) -> None:
    assert relative_path(raw, roots) == (roots[0], expected)


def test_absolute_and_uri_input(root: Path, roots: tuple[Path, ...]) -> None:
    assert relative_path(str(root / "src/app.py"), roots) == (root, "src/app.py")
    assert relative_path(root / "src/app.py", roots) == (root, "src/app.py")
    assert relative_path(f"file://{root}/src/app.py", roots) == (root, "src/app.py")
    assert relative_path(f"file://localhost{root}/src/app.py", roots) == (root, "src/app.py")
    assert relative_path(f"FILE://LOCALHOST{root}/src/app.py", roots) == (root, "src/app.py")
    assert relative_path(f"file:{root}/src/app.py", roots) == (root, "src/app.py")


def test_uri_percent_decoding(root: Path, roots: tuple[Path, ...]) -> None:
    encoded = f"file://{root}/docs/my%20notes%20%C3%A9.md"
    assert relative_path(encoded, roots) == (root, "docs/my notes é.md")
    assert relative_path(f"file://{root}/docs/my%20notes%20é.md", roots) == (
        root,
        "docs/my notes é.md",
    )
    # %2F decodes to a separator; the result is still inside.
    assert relative_path(f"file://{root}/src%2Fapp.py", roots) == (root, "src/app.py")


def test_plain_paths_are_not_percent_decoded(roots: tuple[Path, ...]) -> None:
    assert relative_path("report%20final.txt", roots) == (roots[0], "report%20final.txt")


def test_backslash_is_an_ordinary_character_in_absolute_paths(
    root: Path, roots: tuple[Path, ...]
) -> None:
    assert relative_path(f"{root}/a\\b.txt", roots, must_exist=True) == (root, "a\\b.txt")


# -- traversal ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "..",
        "../outside/secret.txt",
        "src/../../outside/secret.txt",
        "src/pkg/../../../outside",
        "a/b/../../../x",
        "./../x",
        "%2e%2e/outside/secret.txt",
        "src/%2E%2E/%2e%2E/outside",
        ".%2e/x",
        "%2e%2e%2foutside",
    ],
)
def test_relative_traversal(raw: str, roots: tuple[Path, ...]) -> None:
    assert _code(raw, roots) is ErrorCode.PATH_TRAVERSAL


def test_absolute_and_uri_traversal(root: Path, roots: tuple[Path, ...]) -> None:
    assert _code(f"{root}/../outside/secret.txt", roots) is ErrorCode.PATH_TRAVERSAL
    assert _code(f"{root}/src/../../outside", roots) is ErrorCode.PATH_TRAVERSAL
    assert _code(f"file://{root}/../outside/secret.txt", roots) is ErrorCode.PATH_TRAVERSAL
    assert _code(f"file://{root}/%2e%2e/outside/secret.txt", roots) is ErrorCode.PATH_TRAVERSAL
    assert _code(f"file://{root}/src/%2E%2E%2F%2e%2E%2Foutside", roots) is ErrorCode.PATH_TRAVERSAL
    # Out and back in again is fine: only where the path ends counts for absolute input.
    assert relative_path(f"{root}/../{root.name}/src/app.py", roots) == (root, "src/app.py")


def test_outside_workspace(root: Path, roots: tuple[Path, ...]) -> None:
    outside = root.parent / "outside" / "secret.txt"
    assert _code(str(outside), roots) is ErrorCode.PATH_OUTSIDE_WORKSPACE
    assert _code(f"file://{outside}", roots) is ErrorCode.PATH_OUTSIDE_WORKSPACE
    assert _code("/", roots) is ErrorCode.PATH_OUTSIDE_WORKSPACE
    assert _code("/etc/passwd", roots) is ErrorCode.PATH_OUTSIDE_WORKSPACE
    assert _code("src/app.py", ()) is ErrorCode.PATH_OUTSIDE_WORKSPACE


# -- symlinks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", ["leak.txt", "leakdir/secret.txt", "leakdir", "leakdir/new.txt", "dangling"]
)
def test_symlink_escape(raw: str, roots: tuple[Path, ...]) -> None:
    assert _code(raw, roots) is ErrorCode.PATH_SYMLINK_ESCAPE


def test_symlink_escape_through_an_aliased_root(root: Path, roots: tuple[Path, ...]) -> None:
    alias = root.parent / "alias_ws"
    assert _code(f"{alias}/leak.txt", roots) is ErrorCode.PATH_SYMLINK_ESCAPE


def test_symlink_inside_reports_the_target(root: Path, roots: tuple[Path, ...]) -> None:
    assert relative_path("alias.py", roots) == (root, "src/app.py")
    assert relative_path("srclink/pkg/mod.py", roots) == (root, "src/pkg/mod.py")
    assert relative_path("rootlink/src/app.py", roots) == (root, "src/app.py")


def test_workspace_reached_through_a_link(root: Path, roots: tuple[Path, ...]) -> None:
    alias = root.parent / "alias_ws"
    assert relative_path(f"{alias}/src/app.py", roots) == (root, "src/app.py")
    assert resolve_roots([alias]) == (root,)


@pytest.mark.parametrize("raw", ["loop_a", "loop_b", "loop_a/x.py", "self", "self/x"])
def test_symlink_loop(raw: str, roots: tuple[Path, ...]) -> None:
    assert _code(raw, roots) is ErrorCode.PATH_SYMLINK_LOOP


# -- encodings and characters -----------------------------------------------------------------


def test_non_utf8_name(root: Path, roots: tuple[Path, ...]) -> None:
    raw = os.fsencode(root) + b"/" + NON_UTF8_NAME
    assert os.path.exists(raw)
    assert _code(raw, roots) is ErrorCode.PATH_NOT_UTF8
    assert _code(os.fsdecode(raw), roots) is ErrorCode.PATH_NOT_UTF8
    assert _code(NON_UTF8_NAME, roots) is ErrorCode.PATH_NOT_UTF8
    assert _code(f"file://{root}/caf%E9.txt", roots) is ErrorCode.PATH_NOT_UTF8
    # A link with a valid name whose target is not UTF-8.
    assert _code("bad_target", roots) is ErrorCode.PATH_NOT_UTF8


@pytest.mark.parametrize(
    "raw",
    ["a\x00b", "\x00", "src/\napp.py", "a\rb", "\x1b[31mred", "del\x7f", "nel\x85", "csi\x9b"],
)
def test_control_characters(raw: str, roots: tuple[Path, ...]) -> None:
    assert _code(raw, roots) is ErrorCode.PATH_CONTROL_CHARACTER


def test_control_characters_in_uris_and_bytes(root: Path, roots: tuple[Path, ...]) -> None:
    assert _code(f"file://{root}/a%00b", roots) is ErrorCode.PATH_CONTROL_CHARACTER
    assert _code(f"file://{root}/a%0Ab", roots) is ErrorCode.PATH_CONTROL_CHARACTER
    assert _code(f"file://{root}/a%C2%85b", roots) is ErrorCode.PATH_CONTROL_CHARACTER
    assert _code(b"src/a\x00b", roots) is ErrorCode.PATH_CONTROL_CHARACTER


# -- Windows forms --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "C:\\x\\y.py",
        "C:/x/y.py",
        "c:x",
        "D:",
        "\\\\server\\share\\x",
        "\\\\?\\C:\\x",
        "file:///C:/x",
    ],
)
def test_windows_drive_and_unc_forms(raw: str, roots: tuple[Path, ...]) -> None:
    assert _code(raw, roots) is ErrorCode.PATH_OUTSIDE_WORKSPACE


@pytest.mark.parametrize("raw", ["src\\app.py", "\\src\\app.py", "a/b\\c"])
def test_backslash_in_relative_path(raw: str, roots: tuple[Path, ...]) -> None:
    with pytest.raises(PathRejected) as caught:
        relative_path(raw, roots)
    assert caught.value.code is ErrorCode.PATH_INVALID
    assert "forward slashes" in caught.value.message


# -- URIs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "http://example.com/x",
        "https://example.com/src/app.py",
        "untitled:Untitled-1",
        "vscode-notebook-cell:/x.ipynb#W0",
        "notes:v2.txt",
        "file://server/share/x.py",
        "file://user@localhost/x",
    ],
)
def test_unsupported_uris(raw: str, roots: tuple[Path, ...]) -> None:
    assert _code(raw, roots) is ErrorCode.UNSUPPORTED_URI


@pytest.mark.parametrize("suffix", ["?x=1", "#L10", "/%zz", "/%4"])
def test_malformed_file_uris(suffix: str, root: Path, roots: tuple[Path, ...]) -> None:
    assert _code(f"file://{root}/src/app.py{suffix}", roots) is ErrorCode.PATH_INVALID


def test_file_uri_without_absolute_path(roots: tuple[Path, ...]) -> None:
    assert _code("file:src/app.py", roots) is ErrorCode.PATH_INVALID


# -- invalid input --------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", b"", ".", "./", "a/..", "src/.."])
def test_empty_and_root_itself(raw: str | bytes, roots: tuple[Path, ...]) -> None:
    assert _code(raw, roots) is ErrorCode.PATH_INVALID


def test_root_itself_in_other_spellings(root: Path, roots: tuple[Path, ...]) -> None:
    assert _code(str(root), roots) is ErrorCode.PATH_INVALID
    assert _code(f"file://{root}/", roots) is ErrorCode.PATH_INVALID
    assert _code("rootlink", roots) is ErrorCode.PATH_INVALID


@pytest.mark.parametrize("raw", [None, 42, 3.5, ["src"]])
def test_wrong_types(raw: object, roots: tuple[Path, ...]) -> None:
    assert _code(raw, roots) is ErrorCode.PATH_INVALID


def test_too_long(roots: tuple[Path, ...]) -> None:
    assert _code("a/" * 10_000, roots) is ErrorCode.PATH_INVALID


def test_must_exist(root: Path, roots: tuple[Path, ...]) -> None:
    assert relative_path("src/app.py", roots, must_exist=True) == (root, "src/app.py")
    assert _code("src/gone.py", roots, must_exist=True) is ErrorCode.PATH_INVALID
    assert _code("gone/deeper.py", roots, must_exist=True) is ErrorCode.PATH_INVALID


def test_unreadable_parent(root: Path, roots: tuple[Path, ...]) -> None:
    private = root / "private"
    private.mkdir()
    (private / "x.txt").write_text("")
    private.chmod(0)
    try:
        if os.access(private, os.X_OK):
            pytest.skip(
                "running with privileges that ignore directory permissions (root): "
                "the no-search-permission case cannot be produced"
            )
        with pytest.raises(PathRejected) as caught:
            relative_path("private/x.txt", roots)
        assert caught.value.code is ErrorCode.PATH_INVALID
        assert "cannot be inspected" in caught.value.message
    finally:
        private.chmod(0o755)


def test_file_system_errors_become_rejections(
    root: Path, roots: tuple[Path, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runs as root too, where the chmod test above cannot deny anything.
    assert _code("a" * 300, roots) is ErrorCode.PATH_INVALID  # ENAMETOOLONG
    real_lstat = os.lstat
    denied = f"{root}/src"

    def lstat(path: str) -> os.stat_result:
        if path.startswith(denied):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_lstat(path)

    monkeypatch.setattr(os, "lstat", lstat)
    with pytest.raises(PathRejected) as caught:
        relative_path("src/app.py", roots)
    assert caught.value.code is ErrorCode.PATH_INVALID
    assert caught.value.message == "the path cannot be inspected: Permission denied"


def test_eloop_from_the_file_system(
    roots: tuple[Path, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    def lstat(path: str) -> os.stat_result:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)

    monkeypatch.setattr(os, "lstat", lstat)
    assert _code("src/app.py", roots) is ErrorCode.PATH_SYMLINK_LOOP


# -- nested roots -----------------------------------------------------------------------------


@pytest.fixture
def nested(root: Path) -> tuple[Path, Path]:
    inner = root / "src" / "pkg"
    return root, inner


def test_deepest_root_wins(nested: tuple[Path, Path]) -> None:
    outer, inner = nested
    roots = resolve_roots([outer, inner])
    assert relative_path("src/pkg/mod.py", roots) == (inner, "mod.py")
    assert relative_path(str(inner / "mod.py"), roots) == (inner, "mod.py")
    assert relative_path("src/app.py", roots) == (outer, "src/app.py")
    # The inner root is a root, not a file path of the outer one.
    assert _code("src/pkg", roots) is ErrorCode.PATH_INVALID


def test_relative_input_uses_the_first_root(nested: tuple[Path, Path]) -> None:
    outer, inner = nested
    roots = resolve_roots([inner, outer])
    assert relative_path("mod.py", roots) == (inner, "mod.py")
    assert relative_path(str(outer / "src/app.py"), roots) == (outer, "src/app.py")
    # Relative input may not climb out of the first root, even into another root.
    assert _code("../app.py", roots) is ErrorCode.PATH_TRAVERSAL


# -- helpers --------------------------------------------------------------------------------


def test_resolve_roots(tmp_path: Path) -> None:
    ws, _ = _build(tmp_path)
    alias = tmp_path / "alias_ws"
    assert resolve_roots([ws, alias, str(ws)]) == (ws.resolve(),)
    with pytest.raises(ValueError, match="absolute"):
        resolve_roots(["relative/root"])


def test_is_inside() -> None:
    assert is_inside(Path("/ws/a"), Path("/ws"))
    assert is_inside(Path("/ws"), Path("/ws"))
    assert not is_inside(Path("/ws2/a"), Path("/ws"))
    assert is_inside(Path("/anything"), Path("/"))


def test_rejection_as_validation_result(roots: tuple[Path, ...]) -> None:
    with pytest.raises(PathRejected) as caught:
        relative_path("../x", roots)
    result = caught.value.to_result()
    assert not result.ok
    assert result.to_dict() == {
        "ok": False,
        "errors": [
            {
                "path": "file_path",
                "code": "path_traversal",
                "message": "'..' climbs above the workspace root",
            }
        ],
    }
    assert caught.value.to_result("payload.file_path").errors[0].path == "payload.file_path"


# -- properties -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prop_roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ...]]:
    yield resolve_roots([_build(tmp_path_factory.mktemp("prop"))[0]])


_PIECES = st.sampled_from(
    [
        "src",
        "app.py",
        "..",
        ".",
        "",
        "leak.txt",
        "leakdir",
        "alias.py",
        "srclink",
        "rootlink",
        "loop_a",
        "self",
        "%2e%2e",
        "%2E%2E%2F",
        "é",
        "a b",
        "C:",
        "\\",
        "\\\\",
        "file:",
        "file://",
        "localhost",
        "~",
        "%00",
        "\x00",
        "\udce9",
    ]
)


def _assert_sane(raw: str, roots: tuple[Path, ...]) -> None:
    try:
        root, relpath = relative_path(raw, roots)
    except PathRejected:
        return
    assert root in roots
    assert relpath
    assert not relpath.startswith("/")
    assert ".." not in relpath.split("/")
    joined = posixpath.normpath(posixpath.join(str(root), relpath))
    assert is_inside(Path(joined), root)
    assert is_inside(Path(os.path.realpath(joined)), root)


@given(st.text())
def test_arbitrary_text_is_inside_or_rejected(prop_roots: tuple[Path, ...], raw: str) -> None:
    _assert_sane(raw, prop_roots)


@given(st.lists(_PIECES, max_size=8), st.sampled_from(["", "/", "root", "uri"]))
def test_composed_paths_are_inside_or_rejected(
    prop_roots: tuple[Path, ...], pieces: list[str], start: str
) -> None:
    prefix = {"": "", "/": "/", "root": f"{prop_roots[0]}/", "uri": f"file://{prop_roots[0]}/"}
    _assert_sane(prefix[start] + "/".join(pieces), prop_roots)


# -- a directory cache shared by a batch ----------------------------------------------------

BATCH_INPUTS = [
    "src/app.py",
    "src/pkg/mod.py",
    "srclink/app.py",
    "srclink/pkg/mod.py",
    "rootlink/src/app.py",
    "leakdir/secret.txt",
    "leak.txt",
    "alias.py",
    "loop_a/x.py",
    "self/x",
    "src/new/deeper/file.py",
    "src/../docs/x.md",
    "docs/my notes é.md",
]


def _outcome(raw: str, roots: tuple[Path, ...], cache: paths.DirectoryCache | None) -> object:
    try:
        return relative_path(raw, roots, directories=cache)
    except PathRejected as rejected:
        return rejected.code


@given(st.lists(st.sampled_from(BATCH_INPUTS), min_size=1, max_size=30))
def test_a_shared_directory_cache_changes_no_outcome(
    tmp_path_factory: pytest.TempPathFactory, batch: list[str]
) -> None:
    ws, _ = _build(tmp_path_factory.mktemp("cache"))
    roots = resolve_roots([ws])
    cache: paths.DirectoryCache = {}
    assert [_outcome(raw, roots, cache) for raw in batch] == [
        _outcome(raw, roots, None) for raw in batch
    ]


def test_a_new_batch_sees_a_directory_replaced_by_a_link(ws: Path, roots: tuple[Path, ...]) -> None:
    first: paths.DirectoryCache = {}
    assert relative_path("src/pkg/mod.py", roots, directories=first)[1] == "src/pkg/mod.py"
    (ws / "src" / "pkg" / "mod.py").unlink()
    (ws / "src" / "pkg").rmdir()
    (ws / "src" / "pkg").symlink_to(ws.parent / "outside", target_is_directory=True)
    with pytest.raises(PathRejected) as caught:
        relative_path("src/pkg/secret.txt", roots, directories={})
    assert caught.value.code is ErrorCode.PATH_SYMLINK_ESCAPE


# -- a batch routed at once -----------------------------------------------------------------


def _one_by_one(raw: str, roots: tuple[Path, ...], follow_leaf: bool) -> object:
    try:
        return relative_path(raw, roots, follow_leaf=follow_leaf)
    except PathRejected as rejected:
        return (rejected.code, rejected.message)


def _batched(outcome: tuple[Path, str] | PathRejected) -> object:
    return (outcome.code, outcome.message) if isinstance(outcome, PathRejected) else outcome


@pytest.fixture(scope="module")
def nested_prop_roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ...]:
    ws = _build(tmp_path_factory.mktemp("batch"))[0]
    (ws / "src" / "pkg" / "inner").mkdir()
    return resolve_roots([ws, ws / "src" / "pkg"])


@given(
    st.lists(
        st.tuples(
            st.lists(st.one_of(_PIECES, st.sampled_from(["pkg", "inner", "b.txt"])), max_size=6),
            st.sampled_from(["/", "root", "uri", "uri-host", ""]),
        ),
        min_size=1,
        max_size=25,
    ),
    st.booleans(),
)
def test_a_batch_routes_each_path_as_one_by_one(
    nested_prop_roots: tuple[Path, ...], batch: list[tuple[list[str], str]], follow_leaf: bool
) -> None:
    """The same result, or the same refusal, for every path: a parent shared by many paths
    is resolved once, and nothing else differs."""
    ws = nested_prop_roots[0]
    prefix = {
        "": "",
        "/": "/",
        "root": f"{ws}/",
        "uri": f"file://{ws}/",
        "uri-host": f"file://localhost{ws}/",
    }
    raws = [prefix[start] + "/".join(pieces) for pieces, start in batch]
    assert [
        _batched(o) for o in paths.relative_paths(raws, nested_prop_roots, follow_leaf=follow_leaf)
    ] == [_one_by_one(raw, nested_prop_roots, follow_leaf) for raw in raws]
