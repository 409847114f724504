"""``mplp-lsp validate``: check payloads and envelopes against the schemas and invariants."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mplp_lsp.protocol import json_input
from mplp_lsp.protocol.kinds import Kind, detect_kind
from mplp_lsp.protocol.result import ErrorCode, ValidationResult

AUTO = "auto"


@dataclass(frozen=True, slots=True)
class Checked:
    name: str
    kind: str | None
    result: ValidationResult

    def to_json(self) -> dict[str, Any]:
        return {"input": self.name, "kind": self.kind, **self.result.to_dict()}


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "validate",
        help="validate integration payloads or envelopes",
        description=(
            "Validate MPLP integration payloads (tool, file_update, git, ci), envelopes and "
            "observability events against the JSON schemas and the invariants. A file holds "
            "one JSON value, or one per line (JSON Lines). Exit status: 0 all valid, 1 any "
            "invalid, 2 usage or I/O error."
        ),
    )
    parser.add_argument(
        "--kind",
        choices=[AUTO, *(kind.value for kind in Kind)],
        default=AUTO,
        help="what the inputs are (default: recognise each input)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON result per input line")
    parser.add_argument("inputs", nargs="+", metavar="FILE", help="input files, or - for stdin")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    io_failed = False
    any_invalid = False
    for name in args.inputs:
        try:
            text = _read(name)
        except OSError as exc:
            print(f"mplp-lsp validate: cannot read {name}: {_reason(exc)}", file=sys.stderr)
            io_failed = True
            continue
        for checked in check_text(name, text, args.kind):
            any_invalid |= not checked.result.ok
            _print(checked, as_json=args.json)
    return 2 if io_failed else 1 if any_invalid else 0


def _read(name: str) -> bytes:
    """The raw bytes: text that is not UTF-8 is invalid input, reported as such."""
    if name == "-":
        return sys.stdin.buffer.read()
    return Path(name).read_bytes()


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def check_text(name: str, raw: str | bytes, kind: str = AUTO) -> Iterator[Checked]:
    try:
        text = json_input.text_of(raw)
    except json_input.JsonRejected as not_text:
        yield _invalid_json(name, not_text)
        return
    try:
        yield check_value(name, json_input.loads(text), kind)
        return
    except json_input.JsonRejected as whole_error:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2 or whole_error.code is not ErrorCode.INVALID_JSON:
            yield _invalid_json(name, whole_error)
            return
    for number, line in lines:
        label = f"{name}:{number}"
        try:
            value = json_input.loads(line)
        except json_input.JsonRejected as line_error:
            yield _invalid_json(label, line_error)
            continue
        yield check_value(label, value, kind)


def check_value(name: str, value: Any, kind: str = AUTO) -> Checked:
    chosen = detect_kind(value) if kind == AUTO else Kind(kind)
    if chosen is None:
        message = (
            "cannot tell what this is: expected an envelope, an observability event or a "
            "tool, file_update, git or ci payload (use --kind to say)"
        )
        return Checked(name, None, ValidationResult.single("", ErrorCode.UNKNOWN_KIND, message))
    from mplp_lsp.protocol.validator import validate  # jsonschema: only when validating

    return Checked(name, chosen.value, validate(chosen, value))


def _invalid_json(name: str, error: json_input.JsonRejected) -> Checked:
    return Checked(name, None, error.to_result())


def _print(checked: Checked, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(checked.to_json(), ensure_ascii=False))
        return
    verdict = "ok" if checked.result.ok else "invalid"
    print(f"{verdict:<8} {checked.name} ({checked.kind or 'unknown kind'})")
    for issue in checked.result.errors:
        print(f"    {issue.path or '(root)'}: {issue.code}: {issue.message}")
