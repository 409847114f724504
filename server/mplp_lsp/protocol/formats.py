"""String formats used by the MPLP schemas, checked the same way on every path.

Both validators (the ``jsonschema`` oracle and the ``jsonschema_rs`` fast path) are handed
these functions, so a format verdict can never differ between them. Each returns True for
non-strings: JSON Schema applies ``format`` to strings only.

- ``date-time``: RFC 3339 §5.6 ``date-time`` (``T``/``Z`` in either case, a fraction of any
  length, a numeric offset or ``Z``), with real calendar checks (month lengths, leap years).
  A leap second (``:60``) is accepted as the grammar allows.
- ``uuid``: the RFC 9562 hyphenated form, any version, either case. The stricter lowercase-v4
  rule lives in the invariants (``uuid-v4``).
- ``email``: an ASCII dot-atom local part (RFC 5322 ``atext``), ``@``, and a domain of
  LDH labels (or internationalised labels) with at least one dot, or an address literal
  ``[...]``. No quoted local parts, no comments: such addresses do not appear in Git
  author data in practice and would only widen the attack surface.
- ``uri``: an absolute RFC 3986 URI: a scheme, ``:``, then only RFC 3986 characters with
  well-formed percent escapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# The field ranges are in the pattern (it runs on every timestamp of every event, so no
# int() per field); only a day past the 28th needs the month and the year.
_DATE_TIME = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt](?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)"
    r"(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_UUID_V4_LOWER = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_EMAIL_LOCAL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")
_DOMAIN_LABEL = re.compile(r"(?!-)[^\W_](?:[^\W_]|-){0,62}(?<!-)")
_ADDRESS_LITERAL = re.compile(r"\[[0-9A-Za-z:.]+\]", re.ASCII)
_URI = re.compile(
    r"[A-Za-z][A-Za-z0-9+.\-]*:"
    r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*",
    re.ASCII,
)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def is_date_time(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return False
    day = match[3]
    if day <= "28":  # two ASCII digits compare as their numbers do
        return True
    month = int(match[2])
    days = 29 if month == 2 and _is_leap(int(match[1])) else _DAYS_IN_MONTH[month - 1]
    return int(day) <= days


def is_uuid(value: Any) -> bool:
    return not isinstance(value, str) or _UUID.fullmatch(value) is not None


def is_uuid_v4_lower(value: Any) -> bool:
    """The MPLP identifier rule: lowercase, version 4, RFC variant."""
    return isinstance(value, str) and _UUID_V4_LOWER.fullmatch(value) is not None


def is_email(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    local, at, domain = value.rpartition("@")
    if not at or not local or not domain or len(local) > 64 or len(value) > 254:
        return False
    if _EMAIL_LOCAL.fullmatch(local) is None:
        return False
    if domain.startswith("["):
        return _ADDRESS_LITERAL.fullmatch(domain) is not None
    labels = domain.split(".")
    return len(labels) >= 2 and all(_DOMAIN_LABEL.fullmatch(label) for label in labels)


def is_uri(value: Any) -> bool:
    return not isinstance(value, str) or _URI.fullmatch(value) is not None


FORMAT_CHECKS: dict[str, Callable[[Any], bool]] = {
    "date-time": is_date_time,
    "uuid": is_uuid,
    "email": is_email,
    "uri": is_uri,
}
