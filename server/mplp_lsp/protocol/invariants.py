"""The invariants engine: reads the MPLP invariant YAML files and checks objects against them.

Rule vocabulary (every rule the upstream files use, plus the two the golden fixtures use):
``non-empty-string``, ``enum(a,b)``, ``uuid-v4``, ``iso-datetime``, ``min-length(n)``,
``eq(scope.path)`` / ``eq("literal")``, ``exists``, ``positive-integer``, ``optional-string``,
``one-of([...])``, ``if(path == "literal", rule)``. Paths use dots, ``[n]`` and ``[*]``.

A rule the engine does not know is an error when the file is loaded, never a silent pass.
Each rule decides about a missing value itself (only ``exists`` and ``optional-string`` treat
absence specially; every other rule fails on it) unless the invariant is marked
``when_present: true``, which skips absent values;
``when: {field: value}`` limits a rule to objects whose top-level field has that value.
The upstream files express both conditions only in free-text ``note`` fields; the engine
understands their two phrasings so those files load unchanged, and refuses any other note
that speaks of a condition rather than guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from mplp_lsp.protocol.formats import is_date_time, is_uuid_v4_lower
from mplp_lsp.protocol.result import ErrorCode, ValidationIssue, format_path


class InvariantLoadError(ValueError):
    """An invariant file that cannot be trusted: unknown rule, bad path, bad shape."""


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = _Missing()
# libyaml's safe loader where PyYAML was built with it (its wheels are): the same documents
# and types as yaml.safe_load, read ten times faster, which a session's first event waits for.
_SAFE_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STAR: Final = "*"

PathPart = str | int
Located = tuple[tuple[PathPart, ...], Any]
Environment = Mapping[str, Any]


# --- paths -----------------------------------------------------------------------------

_SEGMENT = re.compile(r"([A-Za-z_$][\w$-]*)|\[(\*|\d+)\]")


def parse_path(text: str) -> tuple[PathPart, ...]:
    """``steps[*].step_id`` → ``("steps", "*", "step_id")``."""
    parts: list[PathPart] = []
    position = 0
    while position < len(text):
        if parts and text[position] == "." and not text.startswith(".[", position):
            position += 1
        match = _SEGMENT.match(text, position)
        if match is None:
            raise InvariantLoadError(f"cannot parse path {text!r} at offset {position}")
        name, index = match.groups()
        if name is not None:
            parts.append(name)
        elif index == _STAR:
            parts.append(_STAR)
        else:
            parts.append(int(index))
        position = match.end()
    if not parts:
        raise InvariantLoadError("empty path")
    return tuple(parts)


def locate(obj: Any, parts: Sequence[PathPart]) -> Iterator[Located]:
    """Every concrete location a (possibly wildcard) path reaches, with its value.

    A wildcard over an empty list reaches nothing (vacuously true); over a missing or
    non-list value it reaches that value's location as ``MISSING``, so a required array
    that is absent still fails.
    """
    yield from _locate(obj, parts, ())


def _locate(obj: Any, parts: Sequence[PathPart], here: tuple[PathPart, ...]) -> Iterator[Located]:
    if not parts:
        yield here, obj
        return
    head, rest = parts[0], parts[1:]
    if head == _STAR:
        if isinstance(obj, list):
            for index, item in enumerate(obj):
                yield from _locate(item, rest, (*here, index))
        else:
            yield here, MISSING
        return
    if isinstance(head, int):
        child = obj[head] if isinstance(obj, list) and -len(obj) <= head < len(obj) else MISSING
    else:
        child = obj.get(head, MISSING) if isinstance(obj, dict) else MISSING
    if child is MISSING:
        yield (*here, head), MISSING
        return
    yield from _locate(child, rest, (*here, head))


# --- rules -----------------------------------------------------------------------------

Check = Callable[[Any, Environment], str | None]
"""Returns None when the value passes, else a short reason."""


@dataclass(frozen=True, slots=True)
class Rule:
    text: str
    code: ErrorCode
    check: Check
    needs_env: bool = False  # compares with other objects or with its own subject


def _non_empty_string(value: Any, _env: Environment) -> str | None:
    if isinstance(value, str) and value.strip():
        return None
    return "must be a non-empty string"


def _uuid_v4(value: Any, _env: Environment) -> str | None:
    return None if is_uuid_v4_lower(value) else "must be a lowercase UUID v4"


def _iso_datetime(value: Any, _env: Environment) -> str | None:
    if isinstance(value, str) and is_date_time(value):
        return None
    return "must be an RFC 3339 date-time"


def _exists(value: Any, _env: Environment) -> str | None:
    return "must be present" if value is MISSING else None


def _positive_integer(value: Any, _env: Environment) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return None
    return "must be a positive integer"


def _optional_string(value: Any, _env: Environment) -> str | None:
    return None if value is MISSING or isinstance(value, str) else "must be a string when present"


def _enum(allowed: Sequence[Any]) -> Check:
    choices = frozenset(allowed)
    reason = "must be one of: " + ", ".join(map(str, allowed))

    def check(value: Any, _env: Environment) -> str | None:
        try:
            # bool is an int in Python: True must not pass as 1 (nor 1 as "1")
            return None if value in choices and not isinstance(value, bool) else reason
        except TypeError:  # unhashable: a list or an object is never a member
            return reason

    return check


def _min_length(minimum: int) -> Check:
    def check(value: Any, _env: Environment) -> str | None:
        if isinstance(value, str | list) and len(value) >= minimum:
            return None
        return f"must have a length of at least {minimum}"

    return check


def _eq(argument: str) -> Check:
    if argument.startswith('"'):
        expected = _json_argument(argument, str)

        def equals_literal(value: Any, _env: Environment) -> str | None:
            return None if value == expected else f"must equal {expected!r}"

        return equals_literal
    scope, _, rest = argument.partition(".")
    if not rest:
        raise InvariantLoadError(f"eq() needs a quoted literal or scope.path, got {argument!r}")
    parts = parse_path(rest)
    if _STAR in parts:
        raise InvariantLoadError(f"eq() reference may not use [*]: {argument!r}")

    def equals_reference(value: Any, env: Environment) -> str | None:
        if scope not in env:
            return f"cannot be checked: {scope!r} is not available to compare with"
        [(_, expected)] = list(locate(env[scope], parts))
        if expected is MISSING:
            return f"cannot be checked: {argument} is missing"
        return None if value == expected else f"must equal {argument} ({expected!r})"

    return equals_reference


def _json_argument(text: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvariantLoadError(f"bad rule argument {text!r}: {exc.msg}") from exc
    if not isinstance(value, kind):
        raise InvariantLoadError(f"rule argument {text!r} must be a {kind.__name__}")
    return value


_IF_CONDITION = re.compile(r"\s*([\w.\[\]*$-]+)\s*==\s*(\"(?:[^\"\\]|\\.)*\")\s*,\s*(.+?)\s*")


def _if(argument: str) -> tuple[Check, ErrorCode]:
    match = _IF_CONDITION.fullmatch(argument)
    if match is None:
        raise InvariantLoadError(f'if() takes (path == "literal", rule), got {argument!r}')
    condition_path = parse_path(match.group(1))
    expected = _json_argument(match.group(2), str)
    inner = parse_rule(match.group(3))

    def check(value: Any, env: Environment) -> str | None:
        _, actual = next(locate(env.get("$self", MISSING), condition_path), ((), MISSING))
        if actual != expected:
            return None
        return inner.check(value, env)

    return check, inner.code


_CALL = re.compile(r"([a-z][a-z0-9-]*)\((.*)\)", re.DOTALL)
_SIMPLE_RULES: dict[str, tuple[Check, ErrorCode]] = {
    "non-empty-string": (_non_empty_string, ErrorCode.INVARIANT_NON_EMPTY_STRING),
    "uuid-v4": (_uuid_v4, ErrorCode.INVARIANT_UUID_V4),
    "iso-datetime": (_iso_datetime, ErrorCode.INVARIANT_ISO_DATETIME),
    "exists": (_exists, ErrorCode.INVARIANT_EXISTS),
    "positive-integer": (_positive_integer, ErrorCode.INVARIANT_POSITIVE_INTEGER),
    "optional-string": (_optional_string, ErrorCode.INVARIANT_OPTIONAL_STRING),
}


def parse_rule(text: str) -> Rule:
    text = text.strip()
    if text in _SIMPLE_RULES:
        check, code = _SIMPLE_RULES[text]
        return Rule(text, code, check)
    call = _CALL.fullmatch(text)
    if call is None:
        raise InvariantLoadError(f"unknown invariant rule {text!r}")
    name, argument = call.group(1), call.group(2).strip()
    if name == "enum":
        values = [item.strip() for item in argument.split(",")]
        if not all(values):
            raise InvariantLoadError(f"enum() with an empty member: {text!r}")
        return Rule(text, ErrorCode.INVARIANT_ENUM, _enum(values))
    if name == "one-of":
        return Rule(text, ErrorCode.INVARIANT_ONE_OF, _enum(_json_argument(argument, list)))
    if name == "min-length":
        if not argument.isdigit():
            raise InvariantLoadError(f"min-length() takes a whole number: {text!r}")
        return Rule(text, ErrorCode.INVARIANT_MIN_LENGTH, _min_length(int(argument)))
    if name == "eq":
        return Rule(text, ErrorCode.INVARIANT_EQ, _eq(argument), needs_env=True)
    if name == "if":
        check, code = _if(argument)
        return Rule(text, code, check, needs_env=True)
    raise InvariantLoadError(f"unknown invariant rule {text!r}")


# --- invariants and sets -----------------------------------------------------------------

_NOTE_WHEN_PRESENT = re.compile(
    r"apply only when \w+ field exists|validate only when present", re.IGNORECASE
)
_NOTE_WHEN_FIELD = re.compile(r"apply when (\w+) == (\w+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Invariant:
    id: str
    scope: str
    path: str
    rule: Rule
    description: str = ""
    when_present: bool = False
    when: Mapping[str, str] = field(default_factory=dict)
    parts: tuple[PathPart, ...] = ()
    _plain: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_plain", self.plain_path)

    @property
    def plain_path(self) -> bool:
        """A dotted path with no ``[*]`` or index: looked up without the generic walker."""
        return not any(part == _STAR or isinstance(part, int) for part in self.parts)

    def applies_to(self, obj: Any) -> bool:
        if not self.when:
            return True
        return isinstance(obj, dict) and all(obj.get(k) == v for k, v in self.when.items())

    def check(
        self, obj: Any, env: Environment, prefix: Sequence[PathPart] = ()
    ) -> list[ValidationIssue]:
        if self._plain:  # the common case, without building a list of locations
            value = obj
            for depth, part in enumerate(self.parts, 1):
                if not isinstance(value, dict) or part not in value:
                    if self.when_present:
                        return []
                    reason = self.rule.check(MISSING, env)
                    return (
                        [] if reason is None else [self._issue(prefix, self.parts[:depth], reason)]
                    )
                value = value[part]
            reason = self.rule.check(value, env)
            return [] if reason is None else [self._issue(prefix, self.parts, reason)]
        issues: list[ValidationIssue] = []
        for where, value in locate(obj, self.parts):
            if value is MISSING and self.when_present:
                continue
            reason = self.rule.check(value, env)
            if reason is not None:
                issues.append(self._issue(prefix, where, reason))
        return issues

    def _issue(
        self, prefix: Sequence[PathPart], where: Sequence[PathPart], reason: str
    ) -> ValidationIssue:
        location = format_path((*prefix, *where))
        return ValidationIssue(location, str(self.rule.code), f"[{self.id}] {location} {reason}")


def _conditions(entry: Mapping[str, Any], where: str) -> tuple[bool, dict[str, str]]:
    when_present = bool(entry.get("when_present", False))
    when = dict(entry.get("when", {}) or {})
    note = str(entry.get("note", "") or "")
    if note:
        if _NOTE_WHEN_PRESENT.search(note):
            when_present = True
        elif (match := _NOTE_WHEN_FIELD.search(note)) is not None:
            when.setdefault(match.group(1), match.group(2))
        elif re.search(r"\b(when|only|if)\b", note, re.IGNORECASE):
            raise InvariantLoadError(
                f"{where}: note states a condition the engine cannot read: {note!r}"
            )
    return when_present, when


def parse_invariant(entry: Mapping[str, Any], default_scope: str | None, where: str) -> Invariant:
    missing = [key for key in ("id", "path", "rule") if not entry.get(key)]
    scope = entry.get("scope", default_scope)
    if missing or not scope:
        raise InvariantLoadError(f"{where}: missing {', '.join(missing) or 'scope'}")
    when_present, when = _conditions(entry, where)
    try:
        rule = parse_rule(str(entry["rule"]))
        parts = parse_path(str(entry["path"]))
    except InvariantLoadError as exc:
        raise InvariantLoadError(f"{where} ({entry['id']}): {exc}") from exc
    return Invariant(
        id=str(entry["id"]),
        scope=str(scope),
        path=str(entry["path"]),
        rule=rule,
        description=str(entry.get("description", "")),
        when_present=when_present,
        when=when,
        parts=parts,
    )


class InvariantSet:
    """Invariants grouped by scope, ready to check objects."""

    def __init__(self, invariants: Iterable[Invariant]) -> None:
        self.invariants = tuple(invariants)
        by_scope: dict[str, list[Invariant]] = {}
        for invariant in self.invariants:
            by_scope.setdefault(invariant.scope, []).append(invariant)
        self._by_scope = {scope: tuple(items) for scope, items in by_scope.items()}
        self._needs_env = {
            scope for scope, items in by_scope.items() if any(i.rule.needs_env for i in items)
        }
        self._plans = {scope: _Plan.of(items) for scope, items in self._by_scope.items()}
        ids = [inv.id for inv in self.invariants]
        if len(ids) != len(set(ids)):
            duplicates = sorted({i for i in ids if ids.count(i) > 1})
            raise InvariantLoadError(f"duplicate invariant ids: {', '.join(duplicates)}")

    @classmethod
    def load(cls, *paths: Path) -> InvariantSet:
        """Load one or more files; a top-level list takes its scope from the file name."""
        loaded: list[Invariant] = []
        for path in paths:
            text = path.read_text(encoding="utf-8")
            document = yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)
            entries = document.get("invariants") if isinstance(document, dict) else document
            if not isinstance(entries, list):
                raise InvariantLoadError(f"{path.name}: expected a list of invariants")
            default_scope = path.stem if isinstance(document, list) else None
            for index, entry in enumerate(entries):
                if not isinstance(entry, dict):
                    raise InvariantLoadError(f"{path.name}[{index}]: expected a mapping")
                loaded.append(parse_invariant(entry, default_scope, f"{path.name}[{index}]"))
        return cls(loaded)

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self._by_scope)

    def for_scope(self, scope: str) -> tuple[Invariant, ...]:
        return self._by_scope.get(scope, ())

    def check(
        self,
        scope: str,
        obj: Any,
        env: Environment | None = None,
        prefix: Sequence[PathPart] = (),
    ) -> list[ValidationIssue]:
        plan = self._plans.get(scope)
        if plan is None or plan.passes(obj):
            return []
        environment: Environment = {**(env or {}), "$self": obj} if scope in self._needs_env else {}
        issues: list[ValidationIssue] = []
        for invariant in plan.applicable(obj):
            issues.extend(invariant.check(obj, environment, prefix))
        return issues


_NO_ENVIRONMENT: Final[Environment] = {}

# One invariant as the quick test runs it: its path's keys, its check, whether an absent
# value passes.
_Step = tuple[tuple[str, ...], Check, bool]


def _steps(invariants: Iterable[Invariant]) -> tuple[_Step, ...]:
    return tuple(
        (tuple(str(part) for part in i.parts), i.rule.check, i.when_present) for i in invariants
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """A scope's invariants, arranged so each object's conditions are tested once."""

    always: tuple[Invariant, ...]
    field: str | None
    by_value: Mapping[Any, tuple[Invariant, ...]]
    other: tuple[Invariant, ...]  # conditions of any other shape, tested one by one
    # When every invariant of the scope reads one plain path and needs no environment,
    # the same arranged as steps: whether an object passes them all is told without
    # building a single issue, list or environment (passes).
    always_steps: tuple[_Step, ...] | None
    steps_by_value: Mapping[Any, tuple[_Step, ...]]

    @classmethod
    def of(cls, invariants: Sequence[Invariant]) -> _Plan:
        always = tuple(i for i in invariants if not i.when)
        single = [i for i in invariants if len(i.when) == 1]
        fields = {next(iter(i.when)) for i in single}
        key = fields.pop() if len(fields) == 1 else None
        grouped: dict[Any, list[Invariant]] = {}
        if key is not None:
            for invariant in single:
                grouped.setdefault(invariant.when[key], []).append(invariant)
        other = tuple(i for i in invariants if i.when and (key is None or len(i.when) != 1))
        by_value = {v: tuple(items) for v, items in grouped.items()}
        simple = not other and all(i.plain_path and not i.rule.needs_env for i in invariants)
        return cls(
            always,
            key,
            by_value,
            other,
            _steps(always) if simple else None,
            {v: _steps(items) for v, items in by_value.items()} if simple else {},
        )

    def passes(self, obj: Any) -> bool:
        """True when ``obj`` certainly passes every invariant that applies to it; False when
        one fails, or the scope needs the full check. Most input is valid, and this is the
        collector's cost per envelope."""
        steps = self.always_steps
        if steps is None or not isinstance(obj, dict):
            return False
        if self.field is not None:
            value = obj.get(self.field)
            if isinstance(value, Hashable):  # an unhashable value matches no condition
                steps = steps + self.steps_by_value.get(value, ())
        for keys, check, when_present in steps:
            found: Any = obj
            for key in keys:
                found = found.get(key, MISSING) if isinstance(found, dict) else MISSING
            if found is MISSING and when_present:
                continue
            if check(found, _NO_ENVIRONMENT) is not None:
                return False
        return True

    def applicable(self, obj: Any) -> Iterable[Invariant]:
        if self.other:
            return self._each_applicable(obj)
        if self.field is not None and isinstance(obj, dict):
            value = obj.get(self.field)
            if isinstance(value, Hashable):  # an unhashable value matches no condition
                return self.always + self.by_value.get(value, ())
        return self.always

    def _each_applicable(self, obj: Any) -> Iterator[Invariant]:
        yield from self.always
        if self.field is not None and isinstance(obj, dict):
            value = obj.get(self.field)
            if isinstance(value, Hashable):
                yield from self.by_value.get(value, ())
        for invariant in self.other:
            if invariant.applies_to(obj):
                yield invariant
