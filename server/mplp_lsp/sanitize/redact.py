"""Secret redaction for free text: commit messages, tool output, CLI arguments, URLs.

Events are stored, logged and forwarded, so every text field passes through :func:`redact`
before any of that happens. A secret is replaced by ``[REDACTED:<kind>]``; the text around it
(an assignment's key, a URL's host, the word ``Bearer``) stays, so the event is still readable.

Two passes:

1. Provider formats (AWS key ids, GitHub, GitLab, Slack, Stripe, Google, OpenAI-style, npm,
   PyPI, private key blocks, JWTs, ``Bearer``/``Basic`` credentials, URL userinfo). Every rule
   is its own pattern beginning with a literal, and all rules scan the original text; their
   hits are merged (leftmost first, then longest). One alternation of the same rules scanned
   the ordinary fixtures at half the speed (36 against 76 MB/s): ``re`` finds a literal
   prefix with a fast substring search, while an alternation tests a character class at every
   position.
2. Keyword assignments: ``key = "value"``, ``key: value``, ``key=value``, ``"key": "value"``
   where the key contains password/passwd/pwd/secret/token/api_key/apikey/access_key/auth/
   credential/private_key (case-insensitive). Only the value is replaced, and only when it
   looks random: at least :data:`MIN_SECRET_LENGTH` characters, not made of words
   (``build-status-session``, ``GITHUB_TOKEN``, ``settings.SECRET_KEY``, URLs and paths), not
   a short hex id, not a placeholder (``$VAR``, ``<...>``, ``{{...}}``, ``***``) and with
   Shannon entropy of at least :data:`ENTROPY_THRESHOLD` bits per character. Unquoted values
   followed by ``(`` or ``[`` are code (``get_token()``, ``os.environ["PW"]``) and never match.

   Measured on the fixtures (``bench/bench_redact.py`` prints the figures): the word filter is
   what keeps ordinary code unchanged. The keyword values there (identifiers, URLs, env var
   names) score 2.5 to 4.5 bits, so an entropy cut alone (gitleaks uses 3.5) would redact many
   of them. The planted random values score 3.25 to 4.67 and the human-made passwords 2.81
   (``hunter2hunter2``) and 3.24, so the threshold sits below all of them at 2.5, where it
   only drops repetitive filler such as ``0x000000``.

   This pass matches on ``str.lower()`` of the text whenever lowering keeps every offset
   (nearly always): a case-insensitive pattern has no literal prefix to search for and runs
   several times slower. Values are judged on the original text.

:func:`redact_args` adds what only an argument vector knows: the value after ``--password`` or
``-token`` is secret whatever it looks like, and so is the value of ``GITHUB_TOKEN=...``.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from mplp_lsp.sanitize.cli_options import PROGRAMS, program_name, secret_spans
from mplp_lsp.sanitize.prefixes import PREFIXED

__all__ = [
    "ENTROPY_THRESHOLD",
    "MIN_SECRET_LENGTH",
    "redact",
    "redact_args",
    "redact_line",
    "redact_name",
    "redact_names",
    "strip_url_credentials",
]

MIN_SECRET_LENGTH = 8
ENTROPY_THRESHOLD = 2.5
_MARK = "[REDACTED:"


def _mark(kind: str) -> str:
    return f"{_MARK}{kind}]"


def _entropy(value: str) -> float:
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in Counter(value).values())


_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
# camelCase, PascalCase, ACRONYMS and snake words, then optional trailing digits (oauth2, v1).
_WORDY_PIECE = re.compile(r"(?:[A-Z]?[a-z]+|[A-Z]+(?![a-z]))*[0-9]*")
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
# Base62 noise splits into many tiny camelCase "words" (QmFzZTYw -> Qm Fz ZT Yw); real
# identifiers with four or more words average at least three letters per word.
_MIN_AVG_WORD = 3.0
_MANY_WORDS = 4
# Pure hex below 32 digits (128 bits) is a short hash, commit id or fingerprint, not a key.
_SHORT_HEX = re.compile(r"[0-9a-f]{1,31}|[0-9A-F]{1,31}")


def _looks_like_words(value: str) -> bool:
    """True for identifiers, dotted names, kebab-case and prose; false for random strings."""
    for piece in _SEPARATORS.split(value):
        if not piece:
            continue
        if not _WORDY_PIECE.fullmatch(piece):
            return False
        words = _WORD.findall(piece)
        if len(words) >= _MANY_WORDS and sum(map(len, words)) / len(words) < _MIN_AVG_WORD:
            return False
    return True


def _looks_random(value: str) -> bool:
    return (
        len(value) >= MIN_SECRET_LENGTH
        and not _looks_like_words(value)
        and not _SHORT_HEX.fullmatch(value)
        and _entropy(value) >= ENTROPY_THRESHOLD
    )


def _is_basic_credential(value: str) -> bool:
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return ":" in decoded


def _has_digit(value: str) -> bool:
    return any(ch.isdigit() for ch in value)


def _not_placeholder(value: str) -> bool:
    """``$TOKEN``, ``${NPM_TOKEN}``, ``<token>``, ``***``: a reference to a secret, not one."""
    return not value.startswith(_PLACEHOLDER_START)


def _header_credential(value: str) -> bool:
    return _not_placeholder(value) and len(value) >= MIN_SECRET_LENGTH


def _password(value: str) -> bool:
    return _not_placeholder(value) and not value.isdigit()  # uid:gid is no password


# -- pass 1: provider formats ---------------------------------------------------------------

# (start, end, replacement, kind) of one redaction in the scanned text.
_Span = tuple[int, int, str, str]


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    # Text without any of these strings cannot match: the rule is skipped without a scan
    # (most texts are short lines, where a scan's fixed cost is what counts).
    hints: tuple[str, ...]
    # Each pattern begins with a literal so ``re`` can search for it. A token may only start
    # where no letter or digit precedes it (``xAKIA...`` is not a key id, ``conf_ghp_...``
    # and ``x-AIza...`` are tokens after a separator);
    # that check is a look-behind placed after the first character, which keeps the literal
    # first and makes every attempt inside a long run fail at once instead of rescanning it.
    # A prefix character that is a class (``[Bb]earer``) also sits in a look-behind and is
    # counted by ``back``, so the whole token is replaced. ``(?P<secret>...)`` narrows the
    # replacement to part of the match (the userinfo, the value after ``Bearer``).
    # Boundaries also refuse ']' before and '[' after a token: after one run a mark can stand
    # where a token character stood, and a second run must not find a token that the first one
    # rejected (``redact`` is idempotent).
    regex: re.Pattern[str]
    back: int = 0
    accept: Callable[[str], bool] | None = None
    render: Callable[[str], str | None] | None = None
    # Replace only the secret group: a provider token that starts earlier (``Bearer x``
    # inside an Authorization header) then wins, with its own kind.
    narrow: bool = False


def _render_userinfo(userinfo: str) -> str | None:
    """Hide the password, and the user name too when it is itself a token."""
    user, colon, password = userinfo.partition(":")
    hide_user = _token_like(user)
    if not (hide_user or password):
        return None
    rendered = _hide_credential(user) if hide_user else user
    return rendered + colon + (_hide_credential(password) if password else "")


def _token_like(user: str) -> bool:
    return bool(_TOKEN_USER.match(user)) or (len(user) >= 16 and _looks_random(user))


def _hide_credential(value: str, kind: str = "url_credentials") -> str:
    """Mark a credential with its provider kind when it is a known token format."""
    inner = _provider_pass(value)
    return inner if _ANY_MARK.fullmatch(inner) else _mark(kind)


# Set-Cookie attributes, not cookies.
_COOKIE_ATTRIBUTES = frozenset({"path", "domain", "expires", "max-age", "samesite", "priority"})


def _render_cookies(header: str) -> str:
    """Each cookie's value hidden, its name kept: ``session=[REDACTED:cookie]; Path=/``."""
    pairs = []
    for pair in header.split(";"):
        name, equals, value = pair.partition("=")
        secret = value.strip()
        kept = (
            not (equals and secret)
            or name.strip().lower() in _COOKIE_ATTRIBUTES
            or _ANY_MARK.fullmatch(secret)  # hidden by an earlier run
            or not _not_placeholder(secret)
        )
        pairs.append(pair if kept else f"{name}={_hide_credential(secret, 'cookie')}")
    return ";".join(pairs)


_TOKEN_USER = re.compile(r"gh[pousr]_|github_pat_|gl[a-z]{1,6}-|xox[a-z]-|npm_|sk-|AKIA|ASIA")
_ANY_MARK = re.compile(r"\[REDACTED:[a-z0-9_]+\]")

_RULES: tuple[_Rule, ...] = (
    _Rule(
        "private_key",
        ("-----BEGIN",),
        re.compile(
            r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            # Up to the END line, never past another BEGIN: a run of headers without END lines
            # then costs one scan of the text, not one per header.
            r"(?:(?:[^-]|-(?!----BEGIN)){0,16384}?"
            r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            # No END line (truncated output): take the header and base64 lines that follow,
            # whole lines only, so a key or value on the next line is never cut in half.
            r"|(?:(?:\r?\n|\\n)(?:[A-Za-z0-9+/=]+|[A-Za-z][A-Za-z\-]*: [^\r\n\\]*)"
            r"(?=\r?\n|\\n|$))*)"
        ),
    ),
    _Rule(
        "aws_access_key",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        re.compile(r"A(?<![A-Za-z0-9\]]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9\[])"),
    ),
    _Rule(
        "google_api_key",
        ("AIza",),
        re.compile(r"A(?<![A-Za-z0-9\]]A)Iza[A-Za-z0-9_\-]{35}(?![\w\-\[])", re.ASCII),
    ),
    _Rule(
        "pypi_token",
        ("pypi-AgEI",),
        re.compile(r"p(?<![A-Za-z0-9\]]p)ypi-AgEI[A-Za-z0-9_\-]{50,}", re.ASCII),
    ),
    _Rule(
        "github_token",
        ("gh", "github_pat_"),
        re.compile(
            r"g(?<![A-Za-z0-9\]]g)(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_\w{22,})(?![\w\[])",
            re.ASCII,
        ),
    ),
    _Rule(
        "gitlab_token",
        ("gl",),
        re.compile(
            r"g(?<![A-Za-z0-9\]]g)l(?:pat|dt|rt|rtr|cbt|ptt|ft|imt|oas|soat|ffct|agent)-[\w\-]{20,}",
            re.ASCII,
        ),
    ),
    _Rule(
        "slack_token",
        ("xox",),
        re.compile(r"x(?<![A-Za-z0-9\]]x)ox[abposre]-[A-Za-z0-9\-]{10,}", re.ASCII),
        accept=_has_digit,
    ),
    _Rule(
        "slack_webhook",
        ("hooks.slack.com/",),
        re.compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[\w/+\-]{16,})",
            re.ASCII,
        ),
    ),
    _Rule(
        "stripe_key",
        ("k_live_", "k_test_"),
        re.compile(r"k(?<![A-Za-z0-9\]][sr]k)(?<=[sr]k)_(?:live|test)_[A-Za-z0-9]{20,}", re.ASCII),
        back=1,
    ),
    _Rule(
        "openai_key",
        ("sk-",),
        re.compile(r"s(?<![A-Za-z0-9\]]s)k-(?:proj-|svcacct-|admin-)?[\w\-]{20,}", re.ASCII),
        accept=_looks_random,
    ),
    _Rule(
        "npm_token",
        ("npm_",),
        re.compile(r"n(?<![A-Za-z0-9\]]n)pm_[A-Za-z0-9]{36}(?![A-Za-z0-9\[])", re.ASCII),
    ),
    _Rule(
        "jwt",
        ("eyJ",),
        re.compile(r"e(?<![A-Za-z0-9\]]e)yJ[\w\-]{5,}\.eyJ[\w\-]{5,}\.[\w\-]*", re.ASCII),
    ),
    _Rule(
        "bearer_token",
        ("earer",),
        re.compile(
            r"earer(?<![\w\]][Bb]earer)(?<=[Bb]earer)[ \t]{1,16}"
            r"(?P<secret>[\w.~+/\-]{16,}={0,2})(?![\w.~+/=\-\[])",
            re.ASCII,
        ),
        back=1,
        accept=_looks_random,
    ),
    _Rule(
        "basic_auth",
        ("asic",),
        re.compile(
            r"asic(?<![\w\]][Bb]asic)(?<=[Bb]asic)[ \t]{1,16}"
            r"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=\[])",
            re.ASCII,
        ),
        back=1,
        accept=_is_basic_credential,
    ),
    _Rule(
        "authorization",
        ("uthorization",),
        # An Authorization or Proxy-Authorization header (curl -H, curl -v, HTTP dumps): the
        # credential after the scheme, whatever it looks like (`token X`, `Bearer X`, `X`).
        # The scheme is atomic: `Bearer [REDACTED:...]` never re-reads `Bearer` as the value.
        re.compile(
            r"uthorization(?<![A-Za-z0-9\]][Aa]uthorization)(?<=[Aa]uthorization)"
            r"[\"']?[ \t]*[:=][ \t]*[\"']?(?>(?:[A-Za-z][\w\-]{0,30}[ \t]+(?=\S))?)"
            r"(?P<secret>[^\s\"'\\,;\[\]]{1,4096})",
            re.ASCII,
        ),
        back=1,
        accept=_header_credential,
        render=partial(_hide_credential, kind="authorization"),
        narrow=True,
    ),
    _Rule(
        "cookie",
        ("ookie",),
        # A Cookie or Set-Cookie header: every value in it is a session.
        re.compile(
            r"ookie(?<![A-Za-z0-9\]][Cc]ookie)(?<=[Cc]ookie)[\"']?[ \t]*:[ \t]*[\"']?"
            r"(?P<secret>[^\s\"'\\][^\r\n\"'\\]{0,4095})",
            re.ASCII,
        ),
        back=1,
        render=_render_cookies,
    ),
    _Rule(
        "npm_auth",
        ("_auth",),
        # .npmrc and `npm config set`: `//registry/:_authToken=X`, `_auth=X`.
        re.compile(
            r"_auth(?<![A-Za-z0-9]_auth)(?:Token)?[ \t]*=[ \t]*(?P<secret>[^\s\"'\[\]]{1,4096})",
            re.ASCII,
        ),
        accept=_not_placeholder,
        render=partial(_hide_credential, kind="npm_auth"),
    ),
    _Rule(
        "user_password",
        ("-u",),
        # `curl -u user:pass`, `--user user:pass`, `--proxy-user=user:pass` in a command
        # line quoted in output or a message; `uid:gid` (docker -u 1000:1000) is no password.
        re.compile(
            r"-u(?<![A-Za-z0-9]-u)(?:ser)?(?:[ \t]+|=)[\"']?[^\s:\"'\[\]]{1,256}:"
            r"(?P<secret>[^\s\"'\[\]]{1,4096})",
            re.ASCII,
        ),
        accept=_password,
        render=partial(_hide_credential, kind="user_password"),
        narrow=True,
    ),
    _Rule(
        "userinfo",
        ("@",),
        # `user:pass@host` without a scheme (scp-like remotes, ftp, database hosts).
        re.compile(
            r":(?<=[A-Za-z0-9._~%+\-]:)(?P<secret>[^\s@/:\"'<>`\\\[\]]{1,256})@(?=[A-Za-z0-9])"
        ),
        accept=_not_placeholder,
        render=partial(_hide_credential, kind="userinfo"),
        narrow=True,
    ),
    _Rule(
        "url_credentials",
        ("://",),
        # '[' and ']' are not allowed in userinfo (RFC 3986); excluding them also keeps a
        # mark from an earlier run from being read as credentials again.
        re.compile(r"""://(?<=[A-Za-z0-9]://)(?P<secret>[^\s/?#"'<>`\\\[\]]{1,256})@"""),
        render=_render_userinfo,
    ),
)


# The rows of PREFIXED as one pattern shaped as a trie of their prefixes (``d(?:o..|api..)``)
# with no groups: rules of their own would each scan the whole text, and groups or one
# branch per row would keep ``re`` from following one branch per character. The boundary
# before a token is checked once its whole prefix has matched, so the many letters that
# begin a prefix cost one comparison each. A hit is then told apart by each row's own
# pattern.
_ENDS_HERE = r"(?![A-Za-z0-9\[])"


def _prefixed_row(prefix: str, body: str) -> str:
    literal = re.escape(prefix)
    return rf"(?<![A-Za-z0-9\]]{literal}){body}{_ENDS_HERE}"


_PREFIXED_ROWS = tuple(
    (kind, re.compile(re.escape(prefix) + _prefixed_row(prefix, body), re.ASCII))
    for kind, prefix, body in PREFIXED
)


def _literal_trie(rows: Sequence[tuple[str, str]]) -> str:
    """``rows`` of (literal, pattern after it) as one alternation sharing common heads."""
    heads: dict[str, list[tuple[str, str]]] = {}
    ends: list[str] = []
    for literal, tail in rows:
        if literal:
            heads.setdefault(literal[0], []).append((literal[1:], tail))
        else:
            ends.append(tail)
    branches = [re.escape(head) + _literal_trie(rest) for head, rest in heads.items()] + ends
    return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"


_PREFIXED = re.compile(
    _literal_trie([(prefix, _prefixed_row(prefix, body)) for _kind, prefix, body in PREFIXED]),
    re.ASCII,
)


def _prefixed_spans(text: str) -> Iterator[_Span]:
    """The vendors' prefixed tokens; the body must hold a digit, as every random token of
    that length does."""
    for match in _PREFIXED.finditer(text):
        kind = next(kind for kind, row in _PREFIXED_ROWS if row.match(text, match.start()))
        if _has_digit(match.group()):
            yield match.start(), match.end(), _mark(kind), kind


_RULES += (
    _Rule(
        "azure_client_secret",
        ("Q~",),
        # Entra ID client secrets: three characters, a digit, "Q~", then 31 to 34 more.
        re.compile(r"Q(?<=[\w~.\-]{3}[0-9]Q)~[\w~.\-]{31,34}(?![\w~.\-\[])", re.ASCII),
        back=4,
    ),
    _Rule(
        "telegram_bot_token",
        (":AA",),
        # <bot id>:<secret>; the id is public, the part after the colon is the credential.
        re.compile(r":(?<=[0-9]:)(?P<secret>AA[\w\-]{33})(?![\w\-\[])", re.ASCII),
        narrow=True,
    ),
    _Rule(
        "discord_webhook",
        ("discord",),
        re.compile(r"discord(?:app)?\.com/api/webhooks/[0-9]+/(?P<secret>[\w\-]{20,})", re.ASCII),
        narrow=True,
    ),
    _Rule(
        "private_key",
        ("Private-Lines:",),
        # A PuTTY key file: the lines after "Private-Lines: N" are the key.
        re.compile(r"Private-Lines:[ \t]*[0-9]+(?P<secret>(?:(?:\r?\n|\\n)[A-Za-z0-9+/=]+)+)"),
        narrow=True,
    ),
    _Rule(
        "jdbc_password",
        ("thin:",),
        # jdbc:oracle:thin:user/password@host
        re.compile(r"thin:(?<=:thin:)[^/\s:@\[\]]{1,128}/(?P<secret>[^@\s\[\]]{1,256})@"),
        narrow=True,
        accept=_not_placeholder,
    ),
)


def _scan(
    pattern: re.Pattern[str], haystack: str, judge: Callable[[re.Match[str]], Iterator[_Span]]
) -> Iterator[_Span]:
    """Like ``finditer``, but the next search starts one character after the last match.

    A match can hide another one that starts inside it: ``password = "0a password = "x"``
    quotes ``0a password = `` first, and a rejected ``password=placeholder`` can swallow the
    key of the real assignment behind it. :func:`_apply` sorts out the overlaps.
    """
    position = 0
    while (match := pattern.search(haystack, position)) is not None:
        yield from judge(match)
        position = match.start() + 1


_HINTED = 2048  # characters: up to this, a rule whose hints are absent is not run at all


def _provider_pass(text: str) -> str:
    spans = list(_prefixed_spans(text))
    short = len(text) <= _HINTED  # a long text is searched once by the rule itself
    for rule in _RULES:
        if not short or any(hint in text for hint in rule.hints):
            spans.extend(_scan(rule.regex, text, partial(_provider_spans, rule)))
    return _apply(text, spans)


def _provider_spans(rule: _Rule, match: re.Match[str]) -> Iterator[_Span]:
    text = match.string
    start, end = match.start() - rule.back, match.end()
    if "secret" in match.re.groupindex:
        secret_start, secret_end = match.span("secret")
        if rule.narrow:
            start, end = secret_start, secret_end
    else:
        secret_start, secret_end = start, end
    secret = text[secret_start:secret_end]
    if rule.accept is not None and not rule.accept(secret):
        return
    rendered = _mark(rule.kind) if rule.render is None else rule.render(secret)
    if rendered is not None:
        yield start, end, text[start:secret_start] + rendered + text[secret_end:end], rule.kind


def _apply(text: str, spans: list[_Span]) -> str:
    """Splice the replacements in, leftmost first and, at the same start, longest first."""
    if not spans:
        return text
    spans.sort(key=lambda span: (span[0], -span[1]))
    out: list[str] = []
    done = 0
    for start, end, replacement, kind in spans:
        if end <= done:
            continue
        if start < done:
            # Sticks out of an earlier replacement: the rest of it is secret too.
            out.append(_mark(kind))
        else:
            out.append(text[done:start])
            out.append(replacement)
        done = end
    out.append(text[done:])
    return "".join(out)


# -- pass 2: keyword assignments ------------------------------------------------------------

# One pattern per keyword, each starting with its literal spelling (see the module docstring).
_KEYWORDS = (
    r"passw(?:ord|d)",
    r"passphrase",
    r"pwd",
    r"secret",
    r"token",
    r"auth(?!ors?(?![a-z]))",  # not author, authors
    r"credential",
    r"api[_\-]?key",
    r"access[_\-]?key",
    r"private[_\-]?key",
    r"account[_\-]?key",  # Azure's AccountKey=
    r"signature",  # X-Amz-Signature=, X-Goog-Signature=
)
# Unquoted values (.env, YAML, shell): printable ASCII without quotes, brackets and
# separators, '=' only as base64 padding (so `a=b=c` chains stay short); possessive, so
# `get_token(` cannot back off to `get_toke` and pass the look-ahead.
_UNQUOTED = r"[!#$%*+\-./0-9:?@A-Z^_a-z~]{8,256}+={0,2}(?![(\[])"
_ASSIGNMENT_TAIL = (
    r"[\w.\-]{0,64}+"  # rest of the key: db_password, token.value, x-api-key
    + r"""["'`]?\]?[ \t]*"""  # closing quote of a JSON key or of a ["key"] subscript
    # A type annotation, `token: str = "..."`; the space before '=' keeps the base64 padding
    # of `secret: c2VjcmV0=` part of a value. See _keyword_spans for the other reading.
    + r"(?::[ \t]+(?P<type>[A-Za-z_][\w.\[\]|, ]{0,59}?)[ \t]+(?==))?"
    + r"(?::=|=>|[?+]?=(?!=)|:(?=[ \t\"'`]))[ \t]*"  # ':' needs a space or quote after
    + r"""(?:"(?P<v1>[^"\n]{8,256})"|'(?P<v2>[^'\n]{8,256})'|`(?P<v3>[^`\n]{8,256})`"""
    + f"|(?P<v4>{_UNQUOTED}))"
)
_UNQUOTED_VALUE = re.compile(_UNQUOTED)
_ASSIGNMENTS = tuple(re.compile(keyword + _ASSIGNMENT_TAIL) for keyword in _KEYWORDS)
_ASSIGNMENTS_ANYCASE = tuple(
    re.compile(keyword + _ASSIGNMENT_TAIL, re.IGNORECASE) for keyword in _KEYWORDS
)
# The literal each keyword begins with: a text without it is not scanned for that keyword.
_KEYWORD_HEADS = tuple(re.match(r"[a-z]+", keyword).group() for keyword in _KEYWORDS)  # type: ignore[union-attr]
_VALUE_GROUPS = ("v1", "v2", "v3", "v4")
_PLACEHOLDER_START = ("$", "%", "<", "{", "#", "*")
_AWS_SECRET = re.compile(r"[A-Za-z0-9/+]{40}")


def _keyword_pass(text: str) -> str:
    lowered = text.lower()
    if len(lowered) == len(text):
        haystack, patterns = lowered, _ASSIGNMENTS
    else:
        # A few characters change length when lowered (U+0130); offsets would drift.
        haystack, patterns = text, _ASSIGNMENTS_ANYCASE
    judge = partial(_keyword_spans, text)
    spans: list[_Span] = []
    short = len(text) <= _HINTED
    for head, pattern in zip(_KEYWORD_HEADS, patterns, strict=True):
        if not short or head in lowered:
            spans.extend(_scan(pattern, haystack, judge))
    return _apply(text, spans)


def _keyword_spans(text: str, match: re.Match[str]) -> Iterator[_Span]:
    if _inside_mark(match.string, match.start()):
        return
    group = next(name for name in _VALUE_GROUPS if match.group(name) is not None)
    yield from _value_span(text, match, *match.span(group))
    if match.group("type") is not None:
        # `key: word = value` also reads as `key: word`. Judge that reading too: once a run
        # has replaced the value after '=', the pattern falls back to it, and a second run
        # must come to the same verdict as the first.
        bare = _UNQUOTED_VALUE.match(match.string, match.start("type"))
        if bare is not None:
            yield from _value_span(text, match, *bare.span())


def _value_span(text: str, match: re.Match[str], start: int, end: int) -> Iterator[_Span]:
    value = text[start:end]
    if _secret_value(value):
        # A few characters before the keyword catch the "aws_" of aws_secret_access_key.
        key = match.string[max(0, match.start() - 8) : start].lower()
        kind = "aws_secret_key" if _is_aws_secret(key, value) else "keyword_secret"
        yield start, end, _mark(kind), kind


def _inside_mark(haystack: str, index: int) -> bool:
    """Whether ``index`` falls in a ``[REDACTED:<kind>]``: kinds like github_token are keywords."""
    window = haystack[max(0, index - 40) : index].lower()
    opening = window.rfind(_MARK.lower())
    return opening >= 0 and "]" not in window[opening:]


def _secret_value(value: str) -> bool:
    return _MARK not in value and not value.startswith(_PLACEHOLDER_START) and _looks_random(value)


def _is_aws_secret(key: str, value: str) -> bool:
    return bool(_AWS_SECRET.fullmatch(value)) and ("secret" in key or "aws" in key)


# -- pass 3: values that are secret by where they stand ---------------------------------------
#
# In free text a ``password: word`` may be prose or code, so pass 2 wants a random-looking
# value. Some places say for certain that a value is a credential, whatever it looks like:
# a URL query parameter naming one, a connection string's Password=/AccountKey=, a libpq
# ``password=``, a .netrc entry, an HTTP header line naming one, and the options of the
# command-line programs in :mod:`.cli_options`.

_QUERY = re.compile(r"[?&](?P<key>[A-Za-z_][\w.\-]{0,63})=(?P<value>[^&#\s\"'<>`\\\[\]]{1,4096})")
# Query keys that name a credential without saying "password" or "token".
_QUERY_KEYS = frozenset(
    {"sig", "signature", "x-amz-signature", "x-goog-signature", "pwd", "pass", "passwd"}
)
# key=value; pairs of ADO.NET, ODBC, JDBC and Azure connection strings.
_PAIR = re.compile(
    r"(?:^|(?<=[;\s\"'`(]))(?P<key>[A-Za-z][A-Za-z0-9 _.\-]{0,40}?)[ \t]*=[ \t]*"
    r"(?P<value>[^;\r\n\"'`]*)"
)
_LINES_WITH_SEMICOLONS = re.compile(r"^[^\r\n;]*;[^\r\n]*", re.MULTILINE)
_JOINED_PAIRS = re.compile(r"=[^;\r\n]*;[ \t]*[A-Za-z][A-Za-z0-9 _.\-]{0,40}=")
_CONNECTION_KEYS = frozenset({"pwd", "pass", "sharedaccesssignature"})
# libpq's keyword/value strings: "host=db user=app password=...".
_LIBPQ_CONTEXT = re.compile(
    r"(?<![\w.\-])(?:host|hostaddr|dbname|user|port|sslmode|service)[ \t]*="
)
_LIBPQ_PASSWORD = re.compile(
    r"(?<![\w.\-])password[ \t]*=[ \t]*(?:'(?P<quoted>(?:[^'\\\r\n]|\\.)+)'|(?P<bare>[^\s'\"]+))",
    re.IGNORECASE,
)
# .netrc: "machine HOST [login USER] [account X] password SECRET", on one line or several.
_NETRC = re.compile(
    r"(?<![\w.\-])(?:machine[ \t]+\S+|default)(?:(?:\s|\\n)+(?:login|account|port)[ \t]+\S+)*"
    r"(?:\s|\\n)+password[ \t]+(?P<value>(?:[^\s\\]|\\(?!n))+)"
)
# A header line naming a credential: X-Api-Key: ..., Private-Token: ... As an HTTP dump shows
# it (a Title-Case name at the start of a line), as curl -v does (after "> " or "< ", any
# case), or after curl's -H/--header in a command line. A lowercase "id-token: write" at
# the start of a line is YAML, not a header.
# Each form begins with a literal ("\n", "-") so ``re`` can search for it: a "^" in front would
# be tried at every position. The text is searched with a "\n" put before it.
_HEADER_NAME_VALUE = (
    r"(?P<name>[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+)[ \t]*:[ \t]*(?P<value>[^\r\n\"']+)"
)
_HEADERS = (
    re.compile(r"\n[ \t]*(?:(?=[A-Z])|[<>][ \t]+)" + _HEADER_NAME_VALUE),
    re.compile(r"-(?:H|-header)(?:[ \t]+|=)[\"']?" + _HEADER_NAME_VALUE),
)
_HANDLED_HEADERS = frozenset({"proxy-authorization", "set-cookie"})  # pass 1's own rules
_TEXT_TOKEN = re.compile(r"\S+")


# A program of the table as a word of its own, or as a path's last part (/usr/bin/mysql):
# after white space, a quote, '(', '|', ';', '&' or a path separator, and not followed by a
# word character, '-' or ':' ("https://..." and "git: ..." are no command lines). The text
# is searched with a "\n" put before it; starting with a class of a few characters lets
# ``re`` skip every other position at once.
_PROGRAM_WORD = re.compile(
    r"[\s\"'`(|;&/\\]"
    + _literal_trie([(name, "") for name in sorted(PROGRAMS)])
    + r"(?:\.exe)?(?![\w\-:])"
)
_WORD_OPENERS = "\"'`("  # around a command-line word quoted in text
_WORD_CLOSERS = "\"'`),;"
_CLOSING = {'"': '"', "'": "'", "`": "`", "(": ")"}
_COMMAND_SEPARATORS = frozenset({";", "|", "||", "&&", "&"})


def _structured_pass(text: str, *, in_names: bool = False) -> str:
    """``in_names``: ``text`` is names (refs, paths), one a line: no header, .netrc or command
    line stands in a name, and those rules read across lines, which names must never do."""
    found: list[_Span | None] = []
    has_password = "password" in text.lower()
    if "=" in text:
        if "?" in text or "&" in text:
            found.extend(_query_spans(text))
        if ";" in text:
            found.extend(_connection_spans(text))
        if has_password:
            found.extend(_libpq_spans(text))
    if not in_names:
        if has_password:
            found.extend(
                _hidden(text, m.span("value"), "netrc_password")
                for word in ("machine", "default")
                for m in _matches_at(_NETRC, text, word)
            )
        if ":" in text and "-" in text:
            found.extend(_header_spans(text))
        found.extend(_command_line_spans(text))
    return _apply(text, [span for span in found if span is not None]) if found else text


def _hidden(text: str, span: tuple[int, int], kind: str) -> _Span | None:
    """The span of a value to hide, unless it is a placeholder or hidden already."""
    start, end = span
    while end > start and text[end - 1] in " \t":
        end -= 1
    value = text[start:end]
    if not value or _MARK in value or value.startswith(_PLACEHOLDER_START):
        return None
    return start, end, _mark(kind), kind


def _query_spans(text: str) -> Iterator[_Span | None]:
    for match in _QUERY.finditer(text):
        key = match.group("key")
        if key.lower() in _QUERY_KEYS or _secret_key(key):
            yield _hidden(text, match.span("value"), "url_credentials")


def _connection_spans(text: str) -> Iterator[_Span | None]:
    """A pair is in a connection string when a ';' joins it to another key=value pair (a
    statement of code ends in ';' too, but nothing of the kind follows it)."""
    for line in _LINES_WITH_SEMICOLONS.finditer(text):
        if _JOINED_PAIRS.search(text, line.start(), line.end()) is None:
            continue
        pairs = list(_PAIR.finditer(text, line.start(), line.end()))
        joined = {
            index
            for index, (first, second) in enumerate(itertools.pairwise(pairs))
            if text[first.end() : second.start()].strip(" \t") == ";"
        }
        for index, match in enumerate(pairs):
            if index not in joined and index - 1 not in joined:
                continue
            key = match.group("key").replace(" ", "").lower()
            if key in _CONNECTION_KEYS or _secret_key(key):
                yield _hidden(text, match.span("value"), "connection_secret")


def _libpq_spans(text: str) -> Iterator[_Span | None]:
    for match in _matches_at(_LIBPQ_PASSWORD, text, "password"):
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        line = text[line_start : len(text) if line_end < 0 else line_end]
        if _LIBPQ_CONTEXT.search(line):
            group = "quoted" if match.group("quoted") is not None else "bare"
            yield _hidden(text, match.span(group), "connection_secret")


def _matches_at(pattern: re.Pattern[str], text: str, word: str) -> Iterator[re.Match[str]]:
    """``pattern`` matched where ``word`` (lowercase) starts, in any case: a str.find loop
    is far cheaper than letting a pattern with a look-behind try every position."""
    lowered = text.lower()
    if len(lowered) != len(text):  # U+0130 and friends: offsets would drift
        yield from pattern.finditer(text)
        return
    position = lowered.find(word)
    while position >= 0:
        match = pattern.match(text, position)
        if match is not None:
            yield match
        position = lowered.find(word, position + 1)


def _header_spans(text: str) -> Iterator[_Span | None]:
    haystack = "\n" + text  # offsets in it are one past those in text
    for pattern in _HEADERS:
        for match in pattern.finditer(haystack):
            name = match.group("name").lower()
            if name not in _HANDLED_HEADERS and _secret_header(name):
                start, end = match.span("value")
                yield _hidden(text, (start - 1, end - 1), "header_secret")


def _command_line_spans(text: str) -> Iterator[_Span | None]:
    """The options of :mod:`.cli_options` in command lines quoted in text: each line where a
    program of the table stands as a word of its own."""
    done = -1  # the end of the last line read
    for match in _PROGRAM_WORD.finditer("\n" + text):
        start = match.start()  # the program's offset in text: one past the separator's
        if start < done:
            continue
        line_start = text.rfind("\n", 0, start) + 1
        done = text.find("\n", start)
        done = len(text) if done < 0 else done
        yield from _line_command_spans(text, text[line_start:done], line_start)


def _line_command_spans(text: str, line: str, at: int) -> Iterator[_Span | None]:
    """The table's secrets in one line, read as command lines: a command ends at ``;``,
    ``|``, ``&&``, ``||``, a word ending in ``;``, or the quote or backtick that opened
    right before its program (``sh -c '...'``, ```...```)."""
    tokens: list[str] = []
    starts: list[int] = []
    closer = ""
    for match in _TEXT_TOKEN.finditer(line):
        raw = match.group()
        lead = len(raw) - len(raw.lstrip(_WORD_OPENERS))
        token = raw[lead:].rstrip(_WORD_CLOSERS)
        if lead and program_name(token) in PROGRAMS:
            yield from _segment_spans(text, tokens, starts)
            tokens, starts = [], []
            closer = _CLOSING[raw[lead - 1]]
        elif raw.startswith("("):  # "(401)", "(see below)": prose after the command
            yield from _segment_spans(text, tokens, starts)
            tokens, starts, closer = [], [], ""
        tokens.append(token)
        starts.append(at + match.start() + lead)
        if raw in _COMMAND_SEPARATORS or raw.endswith(";") or (closer and raw.endswith(closer)):
            yield from _segment_spans(text, tokens, starts)
            tokens, starts, closer = [], [], ""
    yield from _segment_spans(text, tokens, starts)


def _segment_spans(text: str, tokens: list[str], starts: list[int]) -> Iterator[_Span | None]:
    for index, start, end in secret_spans(tokens):
        yield _hidden(text, (starts[index] + start, starts[index] + end), "cli_secret")


def redact(text: str) -> str:
    """Replace every recognised secret in ``text`` by ``[REDACTED:<kind>]``.

    Never raises for a ``str``, and is idempotent: ``redact(redact(x)) == redact(x)``.
    """
    if not text:
        return text
    return _structured_pass(_keyword_pass(_provider_pass(text)))


# -- names: refs, branches, file paths --------------------------------------------------------

# In a name a user chose, `password=value` is an assignment whatever the value looks like
# (`fix/password=hunter2`): a branch name is no place for prose that happens to say so. One
# pattern per keyword, beginning with it, over the lowered name (as in pass 2).
_NAME_ASSIGNMENTS = tuple(
    re.compile(keyword + r"[\w.\-]{0,64}?[=:](?P<value>[^/=:\[\]\n]+)") for keyword in _KEYWORDS
)


def redact_name(name: str) -> str:
    """Redact a ref, branch or file name: :func:`redact`'s rules for what a name can hold,
    plus ``key=value`` assignments whose key names a credential, whatever the value."""
    if not name:
        return name
    assigned = _name_assignments(name)
    return _structured_pass(_keyword_pass(_provider_pass(assigned)), in_names=True)


def redact_line(line: str) -> str:
    """Redact a log line: :func:`redact`, and assignments as strictly as in names."""
    return redact(_name_assignments(line))


def _name_assignments(name: str) -> str:
    lowered = name.lower()
    if len(lowered) != len(name):
        lowered = name  # U+0130 and friends: offsets would drift; match as written
    spans: list[_Span] = []
    for pattern in _NAME_ASSIGNMENTS:
        for match in pattern.finditer(lowered):
            start, end = match.span("value")
            if not name[start:end].startswith(_PLACEHOLDER_START):
                spans.append((start, end, _mark("keyword_secret"), "keyword_secret"))
    return _apply(name, spans)


def redact_names(names: Sequence[str]) -> list[str]:
    """:func:`redact_name` of each name, in one pass over them all: 200,000 refs are
    redacted in a fraction of a second, where one call per name took seconds. Lines never
    merge: no rule matches across a newline that a name could not hold itself (refs hold
    none; any name that does is redacted on its own)."""
    if not names:
        return []
    if any("\n" in name for name in names):
        return [redact_name(name) for name in names]
    out = redact_name("\n".join(names)).split("\n")
    return out if len(out) == len(names) else [redact_name(name) for name in names]


# -- argument vectors and URLs --------------------------------------------------------------

_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "cookie",
        "pwd",
        "pass",
        "token",
        "secret",
        "auth",
        "credential",
        "credentials",
        "apikey",
    }
)
# Word endings that make a compact name secret too: pgpassword, authtoken, clientsecret.
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "token", "secret", "apikey")
# "<qualifier> key" names: api-key, access_key, PRIVATE_KEY, SECRET_KEY, AccountKey.
_KEY_QUALIFIERS = frozenset(
    {
        "api",
        "access",
        "private",
        "secret",
        "auth",
        "client",
        "account",
        "sharedaccess",
        "subscription",
        "master",
        "signing",
        "encryption",
        "license",
    }
)
_COMPACT_QUALIFIERS = tuple(_KEY_QUALIFIERS)  # accountkey, sharedaccesskey, apikey
# The shell's working directory variables, not passwords.
_NOT_SECRET_ENV = frozenset({"pwd", "oldpwd"})
_NAME_WORDS = re.compile(r"[-_.]+")
_FLAG = re.compile(r"--?([A-Za-z][A-Za-z0-9_.\-]+)(?:=(.*))?", re.DOTALL)


def _secret_name(name: str) -> bool:
    """Whether a flag or variable name says its value is a credential.

    The secret word has to end the name: ``--db-password`` and ``GITHUB_TOKEN`` qualify,
    ``--password-file``, ``--token-ttl`` and ``AUTH_MODE`` do not.
    """
    words = [word for word in _NAME_WORDS.split(name.lower()) if word]
    if not words:
        return False
    last = words[-1]
    if last in _SECRET_WORDS or last.endswith(_SECRET_ENDINGS):
        return True
    if last == "key":
        return len(words) > 1 and words[-2] in _KEY_QUALIFIERS
    return last.endswith("key") and last[:-3].endswith(_COMPACT_QUALIFIERS)


def redact_args(args: Sequence[str], program: str | None = None) -> list[str]:
    """Redact an argument vector (a tool invocation's argv, a hook's command line).

    ``program`` is what the arguments are given to (argv[0], a tool's id): the table of
    password options of common programs (:mod:`.cli_options`) applies from it on, and from
    any program named among the arguments (``sudo mysql -pX``). Then the generic rules:
    ``--password x``, ``--token=x``, Go-style ``-token x``, and ``KEY=value`` items whose key
    names a credential (kinds ``cli_secret`` and ``env_secret``: the name alone decides, the
    value is not judged), such assignments inside an item (``-o user=u,password=x``,
    ``--from-literal=token=x``), then :func:`redact` over every item. Other single-letter
    flags are left alone unless the value shows what it is: ``-u user:pass`` (the part after
    the colon; ``1000:1000`` is a uid:gid), ``-H "Authorization: ..."`` (a header naming a
    credential), ``-b name=value`` (a cookie; ``git checkout -b topic`` has no ``=``).
    ``--no-auth`` style switches take no value and are not treated as secret flags. After
    ``config`` or ``set``, an argument whose last segment names a credential is a key whose
    value follows (``npm config set //host/:_authToken X``, ``git config user.password X``).
    """
    judged = _table_judged(args, program)
    out: list[str] = []
    pending: Callable[[str], str] | None = None
    for index, arg in enumerate(args):
        if index in judged:  # the table's row for this program decided; text rules still apply
            out.append(redact(judged[index]))
            pending = None
            continue
        if pending is not None:
            out.append(pending(arg))
            pending = None
            continue
        flag = _FLAG.fullmatch(arg)
        name = flag.group(1).lower() if flag else ""
        if flag and _secret_name(name) and not name.startswith("no-"):
            if flag.group(2) is None:
                pending = _hide_all
                out.append(arg)
            else:
                out.append(_hide_assigned(arg, flag.start(2), "cli_secret"))
            continue
        valued = _VALUED_FLAGS.get(arg.split("=", 1)[0] if arg.startswith("--") else arg[:2])
        if valued is not None:
            out.append(_valued_flag(arg, valued))
            pending = valued if arg in _VALUED_FLAG_NAMES else None
            continue
        assigned = _ASSIGNED.fullmatch(arg)
        if assigned and _secret_key(assigned.group(1)):
            kind = "env_secret" if _ENV_NAME.fullmatch(assigned.group(1)) else "cli_secret"
            out.append(_hide_assigned(arg, assigned.start(2), kind))
            continue
        if _CONFIG_WORDS.intersection(out) and _secret_key(arg):
            pending = _hide_all
        out.append(redact(_hide_embedded(arg)))
    return out


def _table_judged(args: Sequence[str], program: str | None) -> dict[int, str]:
    """The arguments the table judged, by index, with what it found secret hidden."""
    tokens = list(args) if program is None else [program, *args]
    shift = 0 if program is None else 1
    found: dict[int, list[_Span]] = {}
    for index, start, end in secret_spans(tokens):
        if index >= shift:
            spans = found.setdefault(index - shift, [])
            span = _hidden(tokens[index], (start, end), "cli_secret")
            if span is not None:
                spans.append(span)
    return {index: _apply(args[index], spans) for index, spans in found.items()}


# key=value inside one argument: after its start or a separator (-o user=u,password=x,
# --from-literal=token=x, "host=db password=x"); a quoted value is hidden inside its quotes.
_EMBEDDED = re.compile(
    r"(?:^|(?<=[\s,;&?=(]))(?P<key>[A-Za-z_][\w.\-]{0,63})="
    r"(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|(?P<bare>[^\s,;&\"')]+))"
)


def _hide_embedded(arg: str) -> str:
    if "=" not in arg:
        return arg
    spans: list[_Span] = []
    for match in _EMBEDDED.finditer(arg):
        if _secret_key(match.group("key")):
            group = next(g for g in ("dq", "sq", "bare") if match.group(g) is not None)
            span = _hidden(arg, match.span(group), "cli_secret")
            if span is not None:
                spans.append(span)
    return _apply(arg, spans)


def _hide_all(_arg: str) -> str:
    return _mark("cli_secret")


def _user_value(value: str) -> str:
    """``user:password`` of ``-u``/``--user``: the password goes, the user name stays."""
    user, colon, password = value.partition(":")
    if colon and password and _password(password):
        return f"{redact(user)}:{_mark('cli_secret')}"
    return redact(value)


def _header_value(value: str) -> str:
    name, colon, content = value.partition(":")
    if colon and content.strip() and _secret_header(name.strip().lower()):
        return f"{name}: {_hide_credential(content.strip(), 'header_secret')}"
    return redact(value)


def _cookie_value(value: str) -> str:
    return _mark("cookie") if "=" in value else redact(value)


def _secret_header(name: str) -> bool:
    return name in ("authorization", "proxy-authorization", "cookie", "set-cookie") or (
        _secret_name(name)
    )


# Flags whose value shows whether it is secret: (curl's) -u/--user, -H/--header, -b/--cookie.
_VALUED_FLAGS: dict[str, Callable[[str], str]] = {
    "-u": _user_value,
    "--user": _user_value,
    "--proxy-user": _user_value,
    "-U": _user_value,
    "-H": _header_value,
    "--header": _header_value,
    "--proxy-header": _header_value,
    "-b": _cookie_value,
}
_VALUED_FLAG_NAMES = frozenset(_VALUED_FLAGS)


def _valued_flag(arg: str, judge: Callable[[str], str]) -> str:
    """The flag itself (its value follows), or the flag with its value attached."""
    if arg in _VALUED_FLAG_NAMES:
        return arg
    if arg.startswith("--"):
        flag, _, value = arg.partition("=")
        return f"{flag}={judge(value)}"
    return arg[:2] + judge(arg[2:])  # -uuser:pass, -HAuthorization:...


# `KEY=value`, `user.password=value`, `//host/:_authToken=value`.
_ASSIGNED = re.compile(r"([A-Za-z_/][\w./:@\-]*)=(.*)", re.DOTALL)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_SEGMENTS = re.compile(r"[/:.@]+")
_CONFIG_WORDS = frozenset({"config", "set"})


def _secret_key(key: str) -> bool:
    """Whether a variable or configuration key names a credential (by its last segment)."""
    if key.lower() in _NOT_SECRET_ENV or key.startswith("-"):
        return False
    segments = [segment for segment in _KEY_SEGMENTS.split(key) if segment]
    return bool(segments) and _secret_name(segments[-1])


def _hide_assigned(arg: str, value_start: int, kind: str) -> str:
    if value_start == len(arg):
        return arg
    return arg[:value_start] + _mark(kind)


_URL_AUTHORITY = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#]*)")


def strip_url_credentials(url: str) -> str:
    """Drop the userinfo of a URL: ``https://tok@github.com/o/r.git`` -> ``https://github.com/o/r.git``.

    scp-like git remotes (``git@github.com:o/r.git``) are not URLs and come back unchanged:
    their ``git`` is a user name, not a secret.
    """
    match = _URL_AUTHORITY.match(url)
    if match is None or "@" not in match.group(2):
        return url
    host = match.group(2).rpartition("@")[2]
    return match.group(1) + host + url[match.end() :]
