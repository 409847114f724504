"""The hooks' spool records: what a hook writes parses back, whatever else the log holds."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.vcs.spool import Spool
from mplp_lsp.vcs.spool_records import HookRecord, format_record, parse, parse_line

# What git can put on a line: anything but tabs, newlines and (in names) spaces.
words = st.text(
    st.characters(blacklist_characters="\t\n\r ", blacklist_categories=["Cs"]), min_size=1
)
lines = st.text(st.characters(blacklist_characters="\t\n\r", blacklist_categories=["Cs"]))
records = st.builds(
    HookRecord,
    hook=st.sampled_from(["reference-transaction", "post-commit", "pre-push", "baseline"]),
    git_pid=st.integers(0, 2**22),
    here=st.booleans(),
    args=st.lists(words, max_size=4).map(tuple),
    lines=st.lists(lines.filter(bool), max_size=6).map(tuple),
)


@settings(deadline=None)
@given(records)
def test_a_record_parses_back(record: HookRecord) -> None:
    assert parse_line(format_record(record)) == record


noise = lines.filter(lambda line: not line.startswith("mplp-hook"))


@settings(deadline=None)
@given(st.lists(st.one_of(records, noise), max_size=8), st.binary(max_size=40))
def test_a_log_gives_its_records_in_order_and_skips_the_rest(
    items: list[HookRecord | str], tail: bytes
) -> None:
    text = "".join(
        (format_record(item) if isinstance(item, HookRecord) else item) + "\n" for item in items
    )
    data = text.encode("utf-8") + tail.replace(b"\n", b"")  # a line still being written
    parsed = parse(data, Path("/nonexistent"))
    wanted = [item for item in items if isinstance(item, HookRecord)]
    assert [spooled.record for spooled in parsed.records] == wanted
    assert parsed.consumed == len(text.encode("utf-8"))
    ends = [spooled.end for spooled in parsed.records]
    assert ends == sorted(ends) and all(data[end - 1 : end] == b"\n" for end in ends)
    assert parsed.malformed == sum(1 for item in items if isinstance(item, str))


def test_a_long_record_goes_to_a_side_file_named_by_the_log(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    long = HookRecord("baseline", 7, True, (), tuple(f"{i:040x} refs/tags/t{i}" for i in range(50)))
    short = HookRecord("post-commit", 8, False, ("a" * 40, "refs/heads/main"), ())
    spool.append(long)
    spool.append(short)
    log = (spool.directory / "log").read_text()
    assert log.startswith("mplp-hook-file big.") and len(log.splitlines()) == 2
    taken = spool.take({})
    assert [s.record for _name, s in taken.records] == [long, short]
    assert taken.records[0][1].side_file is not None
    assert taken.records[1][1].side_file is None


def test_a_log_naming_a_file_elsewhere_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(format_record(HookRecord("post-commit", 1, True, (), ())) + "\n")
    for name in ("../secret", str(secret), "big.1.1/../../secret", "big.x.1"):
        parsed = parse(f"mplp-hook-file {name}\n".encode(), tmp_path / "spool")
        assert parsed.records == [] and parsed.malformed == 1, name


def test_lines_appended_to_a_taken_log_are_read_once_later(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    first = HookRecord("post-commit", 1, True, (), ())
    late = HookRecord("post-commit", 2, True, (), ())
    spool.append(first)
    taken = spool.take({})
    [name] = taken.offsets
    with (spool.directory / name).open("a") as handle:  # a hook that opened the log before
        handle.write(format_record(late) + "\n")
    assert spool.pending(taken.offsets)
    again = spool.take(taken.offsets)
    assert [s.record for _name, s in again.records] == [late]
    assert not spool.pending(again.offsets)
