"""Every form in which a real command carries a secret: none survives redaction.

A hypothesis property: argument vectors made of harmless words with secrets planted in
every known form (curl's -u/--user and -H headers, cookies, --passphrase, npm's _authToken,
user:pass@host, KEY=value, assignments inside an argument, every row of the table of
common programs' password options, tokens after a separator), checked against
``redact_args``; the same forms as one command line of text (tool output, a commit
message) against ``redact``, with .netrc entries, connection strings, signed URLs, header
lines and vendors' prefixed keys; and as names (branches, files) against ``redact_name``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from functools import partial

from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.sanitize.cli_options import ARGUMENTS, OPTIONS, POSITIONALS
from mplp_lsp.sanitize.prefixes import PREFIXED
from mplp_lsp.sanitize.redact import redact, redact_args, redact_name

# A secret: a prefix no harmless word holds, then anything a password may hold (no
# whitespace, quotes or separators of the form around it).
SECRETS = st.builds(
    lambda tail: "Qz9" + tail,
    st.text(
        alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+!*%^",
        min_size=5,
        max_size=40,
    ),
)
TOKEN_TAIL = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    min_size=36,
    max_size=36,
)
WORDS = st.sampled_from(
    ["curl", "-s", "-X", "POST", "https://api.example.org/v1/items", "--fail", "-o", "out.json",
     "npm", "publish", "git", "push", "origin", "main", "--verbose", "-v", "build", "."]
)  # fmt: skip
USERS = st.sampled_from(["user", "ada", "deploy-bot", "x"])

ArgvForm = Callable[[str, str], list[str]]
ARGV_FORMS: dict[str, ArgvForm] = {
    "-u user:pass": lambda s, u: ["-u", f"{u}:{s}"],
    "-uuser:pass": lambda s, u: [f"-u{u}:{s}"],
    "--user user:pass": lambda s, u: ["--user", f"{u}:{s}"],
    "--user=user:pass": lambda s, u: [f"--user={u}:{s}"],
    "--proxy-user": lambda s, u: ["--proxy-user", f"{u}:{s}"],
    "-H Authorization token": lambda s, u: ["-H", f"Authorization: token {s}"],
    "-H Authorization Bearer": lambda s, u: ["-H", f"Authorization: Bearer {s}"],
    "-H Authorization bare": lambda s, u: ["-H", f"authorization: {s}"],
    "--header Proxy-Authorization": lambda s, u: ["--header", f"Proxy-Authorization: Basic {s}"],
    "--header=Authorization": lambda s, u: [f"--header=Authorization: token {s}"],
    "-H Cookie": lambda s, u: ["-H", f"Cookie: session={s}"],
    "-H Cookie second": lambda s, u: ["-H", f"Cookie: theme=dark; session={s}"],
    "-H X-Api-Key": lambda s, u: ["-H", f"X-Api-Key: {s}"],
    "-H Private-Token": lambda s, u: ["-H", f"Private-Token: {s}"],
    "--cookie": lambda s, u: ["--cookie", f"session={s}"],
    "-b cookie": lambda s, u: ["-b", f"session={s}"],
    "--passphrase=": lambda s, u: [f"--passphrase={s}"],
    "--passphrase": lambda s, u: ["--passphrase", s],
    "npm config set key value": lambda s, u: [
        "npm", "config", "set", "//registry.example.org/:_authToken", s
    ],
    "npm config set key=value": lambda s, u: [
        "npm", "config", "set", f"//registry.example.org/:_authToken={s}"
    ],
    "git config user.password": lambda s, u: ["git", "config", "credential.password", s],
    "git -c key=value": lambda s, u: ["git", "-c", f"http.extraheader.password={s}", "fetch"],
    "url userinfo": lambda s, u: [f"https://{u}:{s}@git.example.org/o/r.git"],
    "scp-like userinfo": lambda s, u: [f"{u}:{s}@git.example.org:o/r.git"],
    "--password": lambda s, u: ["--password", s],
    "KEY=value": lambda s, u: [f"DEPLOY_TOKEN={s}"],
    "one shell line": lambda s, u: ["sh", "-c", f"curl -u {u}:{s} https://x.example.org"],
    "shell line header": lambda s, u: [
        "sh", "-c", f"curl -H 'Authorization: token {s}' https://x.example.org"
    ],
    "mount -o list": lambda s, u: ["mount", "-o", f"username={u},password={s}", "//srv/x", "/mnt"],
    "--from-literal=k=v": lambda s, u: ["kubectl", "create", "secret", "generic", "db",
                                        f"--from-literal=password={s}"],
    "--env=K=V": lambda s, u: ["docker", "run", f"--env=API_TOKEN={s}", "app"],
    "extra vars": lambda s, u: ["ansible-playbook", "-e", f"ansible_user={u} ansible_password={s}"],
    "libpq string": lambda s, u: ["psql", f"host=db user={u} password={s} dbname=app"],
    "connection string": lambda s, u: ["sqlcmd", "--conn", f"Server=db;User Id={u};Password={s};"],
    "query": lambda s, u: [f"https://api.example.org/v1/x?user={u}&access_token={s}"],
}  # fmt: skip
# Every row of the table of common programs' password options, as the row's example has it.
TABLE_ROWS = [
    *(row.example for row in OPTIONS),
    *(row.example for row in POSITIONALS),
    *(row.example for row in ARGUMENTS),
]


def _table_argv(example: str, secret: str, _user: str) -> list[str]:
    return shlex.split(example.replace("SECRET", secret))


for _example in TABLE_ROWS:
    ARGV_FORMS[_example] = partial(_table_argv, _example)


@given(
    form=st.sampled_from(sorted(ARGV_FORMS)),
    secret=SECRETS,
    user=USERS,
    before=st.lists(WORDS, max_size=4),
    after=st.lists(WORDS, max_size=4),
)
def test_no_planted_secret_survives_redact_args(
    form: str, secret: str, user: str, before: list[str], after: list[str]
) -> None:
    argv = [*before, *ARGV_FORMS[form](secret, user), *after]
    redacted = redact_args(argv)
    assert not any(secret in item for item in redacted), (form, redacted)
    assert redact_args(redacted) == redacted  # stable: a second pass changes nothing


HEADER_FORMS: dict[str, Callable[[str], str]] = {
    "Authorization token": lambda s: f"Authorization: token {s}",
    "Authorization Bearer": lambda s: f"Authorization: Bearer {s}",
    "authorization lower": lambda s: f"authorization: {s}",
    "Proxy-Authorization": lambda s: f"Proxy-Authorization: Basic {s}",
    "json header": lambda s: f'{{"Authorization": "token {s}"}}',
    "Cookie": lambda s: f"Cookie: session={s}",
    "Cookie many": lambda s: f"Cookie: a=1; session={s}; theme=dark",
    "Set-Cookie": lambda s: f"Set-Cookie: session={s}; Path=/; HttpOnly",
    "npmrc": lambda s: f"//registry.example.org/:_authToken={s}",
    "npmrc _auth": lambda s: f"_auth={s}",
    "curl -u in text": lambda s: f"$ curl -u deploy:{s} https://x.example.org",
    "--user in text": lambda s: f"ran curl --user=deploy:{s} -s",
    "userinfo": lambda s: f"mirror at deploy:{s}@ftp.example.org",
    "netrc line": lambda s: f"machine api.example.org login deploy password {s}",
    "netrc entry": lambda s: f"machine api.example.org\n  login deploy\n  password {s}\n",
    "netrc default": lambda s: f"default login anonymous password {s}",
    "ado connection": lambda s: f"Server=db;Database=app;User Id=sa;Password={s};",
    "odbc pwd": lambda s: f"Driver={{ODBC}};Server=db;Uid=sa;Pwd={s};",
    "azure storage": lambda s: f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={s};",
    "azure service bus": lambda s: f"Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey={s}",
    "libpq": lambda s: f"host=db port=5432 user=app password={s} dbname=app",
    "jdbc query": lambda s: f"jdbc:mysql://db/app?user=app&password={s}",
    "jdbc oracle": lambda s: f"jdbc:oracle:thin:scott/{s}@db:1521/orcl",
    "s3 presigned": lambda s: f"GET https://b.s3.amazonaws.com/f?X-Amz-Signature={s}&x=1",
    "gcs signed": lambda s: f"https://storage.googleapis.com/b/o?X-Goog-Signature={s}",
    "azure sas": lambda s: f"https://a.blob.core.windows.net/c/b?sv=2022&sig={s}",
    "x-api-key line": lambda s: f"X-Api-Key: {s}",
    "curl -v header": lambda s: f"> x-auth-token: {s}",
    "private-token -H": lambda s: f"curl -H 'Private-Token: {s}' https://gitlab.example.org",
}


# A command line quoted in text, for every row of the table.
def _table_text(example: str, secret: str) -> str:
    return shlex.join(_table_argv(example, secret, ""))


for _example in TABLE_ROWS:
    HEADER_FORMS[_example] = partial(_table_text, _example)


@given(
    form=st.sampled_from(sorted(HEADER_FORMS)),
    secret=SECRETS,
    prefix=st.sampled_from(["", "> ", "request failed: ", "\n"]),
    suffix=st.sampled_from(["", "\r\n", "\nnext line", " (401)"]),
)
def test_no_planted_secret_survives_redact_in_headers_and_text(
    form: str, secret: str, prefix: str, suffix: str
) -> None:
    text = prefix + HEADER_FORMS[form](secret) + suffix
    redacted = redact(text)
    assert secret not in redacted, (form, redacted)
    assert redact(redacted) == redacted


@given(
    tail=TOKEN_TAIL,
    separator=st.sampled_from(["_", "-", ".", "/", "=", ""]),
    kind=st.sampled_from(["ghp_", "gho_", "ghs_", "npm_"]),
)
def test_a_token_after_any_separator_is_found_in_a_name(
    tail: str, separator: str, kind: str
) -> None:
    token = kind + tail
    name = f"conf{separator}{token}.env" if separator else f"{token}.env"
    assert token not in redact_name(name)


@given(
    key=st.sampled_from(["password", "secret", "token", "db_password", "API_KEY", "Passwd"]),
    value=SECRETS,
    prefix=st.sampled_from(["refs/heads/fix/", "refs/heads/", "feature/", "conf/"]),
)
def test_an_assignment_in_a_name_is_hidden_whatever_the_value(
    key: str, value: str, prefix: str
) -> None:
    assert value not in redact_name(f"{prefix}{key}={value}")


@given(
    row=st.sampled_from(PREFIXED),
    data=st.data(),
    before=st.sampled_from([" ", "=", "_", "/", "\n", '"', "-"]),
)
def test_every_vendors_prefixed_key_is_found(
    row: tuple[str, str, str], data: st.DataObject, before: str
) -> None:
    """A token made to each prefix row's own body pattern (digits in it, as random tokens of
    that length have), after any separator, in text and in a name."""
    _kind, prefix, body = row
    token = prefix + data.draw(
        st.from_regex(f"(?a){body}", fullmatch=True).filter(
            lambda b: any(c.isdigit() for c in b) and b[-1:].isalnum()
        )
    )
    text = f"key{before}{token} used"
    assert token not in redact(text), (row, text)
    assert token not in redact_name(f"conf/{before.strip()}{token}.env"), row
