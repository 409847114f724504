"""The collector's store without HTTP: what a batch body turns into, on a real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.collector.store import Answer, CollectorStore, _parse, read_batch
from mplp_lsp.protocol import json_input
from mplp_lsp.protocol.envelope import build_envelope
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import default_validator


def _envelope(lines_added: int) -> dict[str, object]:
    payload = {
        "file_path": "src/a.py",
        "change_type": "modified",
        "timestamp": "2026-03-02T08:01:00.000Z",
        "lines_added": lines_added,
        "language": "python",
    }
    return build_envelope(Kind.FILE_UPDATE, payload, source_module="ide")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CollectorStore]:
    opened = CollectorStore(tmp_path / "collector.db")
    yield opened
    opened.close()


def _batch(*envelopes: dict[str, object]) -> str:
    items = [{"seq": n, "envelope": e} for n, e in enumerate(envelopes, 1)]
    return json.dumps({"source": "s", "items": items})


def test_an_integer_beyond_64_bits_is_stored_exactly(store: CollectorStore) -> None:
    big = 123_456_789_012_345_678_901_234_567_890
    answer = store.receive(_batch(_envelope(big), _envelope(7)).encode(), None)
    assert answer.status == 200 and answer.body["accepted"] == 2
    stored = [e["envelope"]["payload"]["lines_added"] for e in store.events()]
    assert stored == [big, 7]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("padding", ["", ', "pad": 12345678901234567890123'])  # both parsers
def test_nan_and_infinity_are_invalid_json(
    store: CollectorStore, constant: str, padding: str
) -> None:
    body = _batch(_envelope(1)).replace('"lines_added": 1', f'"lines_added": {constant}')
    body = body.replace('"source": "s"', f'"source": "s"{padding}')
    answer = store.receive(body.encode(), None)
    assert answer.status == 400 and answer.body["error"] == "invalid_json"
    assert store.stats()["stored"] == 0


def test_a_stored_body_is_the_envelope_as_sent(store: CollectorStore) -> None:
    envelope = _envelope(3)
    envelope["payload"]["file_path"] = "src/é/ü.py"  # type: ignore[index]
    assert store.receive(_batch(envelope).encode(), None).status == 200
    assert store.events()[0]["envelope"] == envelope


_DIGITS = st.text("0123456789", min_size=15, max_size=30)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | _DIGITS
    | _DIGITS.map(lambda d: f"sha{d}"),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@given(value=_JSON, spaced=st.booleans())
def test_the_fast_parser_reads_every_body_as_json_does(value: object, spaced: bool) -> None:
    """orjson is used unless a number of 20 or more digits is in the body; either way the
    result is json's, integers beyond 64 bits exact (dumped back to tell 1e23 from 10**23)."""
    body = json.dumps({"items": [value]}, indent=1 if spaced else None).encode()
    assert json.dumps(_parse(body)) == json.dumps(json.loads(body))


def test_a_stream_is_bound_to_the_first_key_that_writes_it(store: CollectorStore) -> None:
    # Written before keys existed: a keyless batch is still taken, and binds nothing.
    assert store.receive(_batch(_envelope(1)).encode(), None).status == 200
    assert store.receive(_batch(_envelope(2)).encode(), None).status == 200
    # The forwarder, upgraded, sends its key: that binds the stream.
    assert store.receive(_batch(_envelope(3)).encode(), None, "key-of-s").status == 200
    assert store.receive(_batch(_envelope(4)).encode(), None, "key-of-s").status == 200
    for offered in (None, "another-key"):
        refused = store.receive(_batch(_envelope(5)).encode(), None, offered)
        assert (refused.status, refused.body["error"]) == (403, "stream_key_mismatch")
    assert store.stats()["stored"] == 4 and store.stats()["refused_stream_writes"] == 2
    # Another stream is another key's.
    other = _batch(_envelope(6)).replace('"source": "s"', '"source": "t"')
    assert store.receive(other.encode(), None, "key-of-t").status == 200


def test_a_collector_that_requires_keys_refuses_a_keyless_batch(tmp_path: Path) -> None:
    strict = CollectorStore(tmp_path / "strict.db", require_stream_keys=True)
    try:
        refused = strict.receive(_batch(_envelope(1)).encode(), None)
        assert (refused.status, refused.body["error"]) == (403, "stream_key_required")
        assert strict.receive(_batch(_envelope(1)).encode(), None, "k").status == 200
    finally:
        strict.close()


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


# Where a nesting may sit in a batch: beside the items, in an item, in an envelope (which
# is then no plain file event), in its payload, or in a payload's field.
_SPOTS = ("batch", "item", "envelope", "payload", "field")


@given(
    nestings=st.lists(
        st.tuples(st.sampled_from(_SPOTS), st.integers(0, 3), st.integers(0, 70)), max_size=3
    ),
    shape_ok=st.booleans(),
)
def test_a_batch_is_refused_as_too_deep_exactly_as_the_whole_walk_refuses_it(
    nestings: list[tuple[str, int, int]], shape_ok: bool
) -> None:
    """read_batch walks around the plain file envelopes it recognised; its verdict is the
    full walk's, and what it calls plain the validator accepts."""
    batch: dict[str, object] = json.loads(_batch(*(_envelope(n) for n in range(4))))
    items: list[dict[str, object]] = batch["items"]  # type: ignore[assignment]
    for spot, index, depth in nestings:
        item = items[index]
        envelope: dict[str, object] = item["envelope"]  # type: ignore[assignment]
        payload: dict[str, object] = envelope["payload"]  # type: ignore[assignment]
        target = {"batch": batch, "item": item, "envelope": envelope, "payload": payload}
        if spot == "field":
            payload["language"] = _nested(depth)
        else:
            target[spot][f"x{depth}"] = _nested(depth)
    if not shape_ok:
        items.append({"seq": "not a number"})
    body = json.dumps(batch).encode()
    try:
        json_input.check_depth(json.loads(body), json_input.MAX_DEPTH + 3)
        too_deep = False
    except json_input.JsonRejected:
        too_deep = True
    if too_deep:
        with pytest.raises(json_input.JsonRejected) as refused:
            read_batch(body)
        assert refused.value.message == f"nested deeper than {json_input.MAX_DEPTH + 3} levels"
        return
    read = read_batch(body)
    if not shape_ok:
        assert isinstance(read, Answer) and read.body["error"] == "invalid_batch"
        return
    assert not isinstance(read, Answer)
    _stream, parsed, plain = read
    for _seq, envelope in parsed:
        if id(envelope) in plain:
            assert default_validator().checked(Kind.ENVELOPE, envelope).ok
