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
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

__all__ = [
    "ENTROPY_THRESHOLD",
    "MIN_SECRET_LENGTH",
    "redact",
    "redact_args",
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
        re.compile(r"A(?<![A-Za-z0-9\]]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9\[])"),
    ),
    _Rule(
        "google_api_key",
        re.compile(r"A(?<![A-Za-z0-9\]]A)Iza[A-Za-z0-9_\-]{35}(?![\w\-\[])", re.ASCII),
    ),
    _Rule("pypi_token", re.compile(r"p(?<![A-Za-z0-9\]]p)ypi-AgEI[A-Za-z0-9_\-]{50,}", re.ASCII)),
    _Rule(
        "github_token",
        re.compile(
            r"g(?<![A-Za-z0-9\]]g)(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_\w{22,})(?![\w\[])",
            re.ASCII,
        ),
    ),
    _Rule(
        "gitlab_token",
        re.compile(
            r"g(?<![A-Za-z0-9\]]g)l(?:pat|dt|rt|rtr|cbt|ptt|ft|imt|oas|soat|ffct|agent)-[\w\-]{20,}",
            re.ASCII,
        ),
    ),
    _Rule(
        "slack_token",
        re.compile(r"x(?<![A-Za-z0-9\]]x)ox[abposre]-[A-Za-z0-9\-]{10,}", re.ASCII),
        accept=_has_digit,
    ),
    _Rule(
        "slack_webhook",
        re.compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[\w/+\-]{16,})",
            re.ASCII,
        ),
    ),
    _Rule(
        "stripe_key",
        re.compile(r"k(?<![A-Za-z0-9\]][sr]k)(?<=[sr]k)_(?:live|test)_[A-Za-z0-9]{20,}", re.ASCII),
        back=1,
    ),
    _Rule(
        "openai_key",
        re.compile(r"s(?<![A-Za-z0-9\]]s)k-(?:proj-|svcacct-|admin-)?[\w\-]{20,}", re.ASCII),
        accept=_looks_random,
    ),
    _Rule(
        "npm_token",
        re.compile(r"n(?<![A-Za-z0-9\]]n)pm_[A-Za-z0-9]{36}(?![A-Za-z0-9\[])", re.ASCII),
    ),
    _Rule(
        "jwt",
        re.compile(r"e(?<![A-Za-z0-9\]]e)yJ[\w\-]{5,}\.eyJ[\w\-]{5,}\.[\w\-]*", re.ASCII),
    ),
    _Rule(
        "bearer_token",
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
        # '[' and ']' are not allowed in userinfo (RFC 3986); excluding them also keeps a
        # mark from an earlier run from being read as credentials again.
        re.compile(r"""://(?<=[A-Za-z0-9]://)(?P<secret>[^\s/?#"'<>`\\\[\]]{1,256})@"""),
        render=_render_userinfo,
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


def _provider_pass(text: str) -> str:
    spans: list[_Span] = []
    for rule in _RULES:
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
    for pattern in patterns:
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


def redact(text: str) -> str:
    """Replace every recognised secret in ``text`` by ``[REDACTED:<kind>]``.

    Never raises for a ``str``, and is idempotent: ``redact(redact(x)) == redact(x)``.
    """
    if not text:
        return text
    return _keyword_pass(_provider_pass(text))


# -- names: refs, branches, file paths --------------------------------------------------------

# In a name a user chose, `password=value` is an assignment whatever the value looks like
# (`fix/password=hunter2`): a branch name is no place for prose that happens to say so. One
# pattern per keyword, beginning with it, over the lowered name (as in pass 2).
_NAME_ASSIGNMENTS = tuple(
    re.compile(keyword + r"[\w.\-]{0,64}?[=:](?P<value>[^/=:\[\]\n]+)") for keyword in _KEYWORDS
)


def redact_name(name: str) -> str:
    """Redact a ref, branch or file name: :func:`redact` plus ``key=value`` assignments
    whose key names a credential, whatever the value looks like."""
    lowered = name.lower()
    if len(lowered) != len(name):
        lowered = name  # U+0130 and friends: offsets would drift; match as written
    spans: list[_Span] = []
    for pattern in _NAME_ASSIGNMENTS:
        for match in pattern.finditer(lowered):
            start, end = match.span("value")
            if not name[start:end].startswith(_PLACEHOLDER_START):
                spans.append((start, end, _mark("keyword_secret"), "keyword_secret"))
    return redact(_apply(name, spans))


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
# "<qualifier> key" names: api-key, access_key, PRIVATE_KEY, SECRET_KEY.
_KEY_QUALIFIERS = frozenset({"api", "access", "private", "secret", "auth", "client"})
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
    return last == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS


def redact_args(args: Sequence[str]) -> list[str]:
    """Redact an argument vector (a tool invocation's argv, a hook's command line).

    Handles ``--password x``, ``--token=x``, Go-style ``-token x``, and ``KEY=value`` items whose
    key names a credential (kinds ``cli_secret`` and ``env_secret``: the name alone decides, the
    value is not judged), then runs :func:`redact` over every item. Single-letter flags are
    left alone (``-p`` is a password for mysql but a port for ssh and docker), except where
    the value shows what it is: ``-u user:pass`` (the part after the colon; ``1000:1000`` is a
    uid:gid), ``-H "Authorization: ..."`` (a header naming a credential), ``-b name=value``
    (a cookie; ``git checkout -b topic`` has no ``=``). ``--no-auth`` style switches take no
    value and are not treated as secret flags. After ``config`` or ``set``, an argument whose
    last segment names a credential is a key whose value follows (``npm config set
    //host/:_authToken X``, ``git config user.password X``).
    """
    out: list[str] = []
    pending: Callable[[str], str] | None = None
    for arg in args:
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
        out.append(redact(arg))
    return out


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
