"""The password and token options of common command-line programs: the one table.

A flag's name says nothing to a generic rule when it is one letter (``-p`` is mysql's
password and docker's port, ``-a`` redis-cli's password and many tools' "all"), or a word
that names no credential (``-storepass``, ``--oauth2-bearer``), or when the secret is an
argument with no flag at all (``vault login TOKEN``, ``htpasswd -b FILE USER PASSWORD``).
So what each program means is written down here, row by row, and each row is tested
(``tests/unit/test_cli_options.py`` runs every row's example). Generic rules in
:mod:`~mplp_lsp.sanitize.redact` still cover the rest (``--password``, ``--api-token``,
``KEY=value``, headers, URLs).

:func:`secret_spans` walks a command line as tokens: a token naming a program of the table
(by its base name: ``/usr/bin/mysql``, ``mysql.exe``) starts that program's rules, so
``sudo docker login -p X`` and ``docker exec db mysql -pX`` are both found; a row with
``after`` applies only once that subcommand has been seen (``docker login -p``, never
``docker run -p 8080:80``). It is used for argument vectors and for command lines in text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

__all__ = [
    "ARGUMENTS",
    "OPTIONS",
    "POSITIONALS",
    "PROGRAMS",
    "SecretArgument",
    "SecretOption",
    "SecretPositional",
    "secret_spans",
]

# Which part of a value is the secret: a span within the value, or None (no secret there).
Part = Callable[[str], tuple[int, int] | None]


def whole(value: str) -> tuple[int, int] | None:
    return (0, len(value)) if value else None


def _after(separator: str) -> Part:
    def part(value: str) -> tuple[int, int] | None:
        index = value.find(separator)
        return (index + 1, len(value)) if index >= 0 and index + 1 < len(value) else None

    return part


after_colon: Final = _after(":")  # user:password (httpie -a, curl -E cert:password)
after_percent: Final = _after("%")  # user%password (smbclient -U)
after_comma: Final = _after(",")  # user,password (lftp -u)
after_equals: Final = _after("=")  # key=value (kubectl --from-literal)


def pass_prefix(value: str) -> tuple[int, int] | None:
    """openssl's ``pass:PASSWORD``; ``env:VAR``, ``file:PATH``, ``fd:N`` and ``stdin`` name
    where the password is, not the password."""
    return (5, len(value)) if value.startswith("pass:") and len(value) > 5 else None


_ORACLE: Final = re.compile(r"(?:userid=)?[^/\s=@]+/(?P<pw>[^@\s]+)(?:@\S*)?", re.IGNORECASE)


def oracle_login(value: str) -> tuple[int, int] | None:
    """``user/password@db`` (sqlplus and Oracle's tools), also as ``userid=...``."""
    match = _ORACLE.fullmatch(value)
    return match.span("pw") if match and not value.startswith("/") else None


@dataclass(frozen=True, slots=True)
class SecretOption:
    """An option of ``programs`` whose value (or ``part`` of it) is a credential.

    ``flags`` are matched exactly; a long flag also as ``--flag=VALUE``. ``separate``: the
    value may be the next argument; ``attached``: glued to a short flag (``-pSECRET``).
    ``after``: subcommand words that must have come first, in this order.
    ``example``: a command line with ``SECRET`` where the secret goes (the row's test).
    """

    programs: tuple[str, ...]
    flags: tuple[str, ...]
    example: str
    after: tuple[str, ...] = ()
    separate: bool = True
    attached: bool = False
    part: Part = whole


@dataclass(frozen=True, slots=True)
class SecretPositional:
    """Arguments without a flag that are credentials: the positionals at ``indexes`` after
    the ``after`` words (-1: the last one), when every short flag letter of ``when_flags``
    is set and none of ``unless_flags``; arguments holding ``=`` are left to the assignment
    rules. A login token is both the first and the last positional: the first, in text
    where prose may follow; the last, where an option's value may come before it."""

    programs: tuple[str, ...]
    indexes: tuple[int, ...]
    example: str
    after: tuple[str, ...] = ()
    when_flags: str = ""
    unless_flags: str = ""
    part: Part = whole


@dataclass(frozen=True, slots=True)
class SecretArgument:
    """Any argument of ``programs`` in which ``part`` finds a secret (``user/pw@db``)."""

    programs: tuple[str, ...]
    part: Part
    example: str


_MYSQL = (
    "mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlpump",
    "mysqlslap", "mysqlbinlog", "mysqlsh", "mariadb", "mariadb-dump", "mariadb-admin",
    "mariadb-import", "mariadb-show", "mariadb-check", "mariadb-slap", "mariadb-binlog",
)  # fmt: skip
_MONGO = (
    "mongosh", "mongo", "mongodump", "mongorestore", "mongoexport", "mongoimport", "mongostat",
    "mongotop", "mongofiles",
)  # fmt: skip
_REDIS = ("redis-cli", "keydb-cli", "valkey-cli")
_REGISTRY_LOGIN = ("docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "crane", "finch")
_LDAP = (
    "ldapsearch", "ldapadd", "ldapmodify", "ldapdelete", "ldapwhoami", "ldappasswd",
    "ldapcompare", "ldapmodrdn", "ldapexop", "ldapvc",
)  # fmt: skip
_SAMBA = ("smbclient", "rpcclient", "smbcacls", "smbget", "smbtree", "smbcquotas", "net")
_MSSQL = ("sqlcmd", "bcp", "osql", "isql", "mssql-cli")
_ORACLE_TOOLS = ("sqlplus", "rman", "expdp", "impdp", "sqlldr", "dgmgrl")
_HTTPIE = ("http", "https", "httpie", "xh", "xhs")
_JAVA_KEYS = ("keytool", "jarsigner")
_ZIP = ("zip", "unzip", "zipcloak", "funzip")
_SEVEN_ZIP = ("7z", "7za", "7zr", "7zz")
_RAR = ("rar", "unrar", "winrar")

OPTIONS: Final[tuple[SecretOption, ...]] = (
    SecretOption(_REGISTRY_LOGIN, ("-p", "--password"), "docker login -u ci -p SECRET reg.io",
                 after=("login",)),
    SecretOption(("helm",), ("-p", "--password"), "helm registry login -u ci -p SECRET reg.io",
                 after=("login",)),
    SecretOption(("az",), ("-p", "--password"), "az login -u me@x.org -p SECRET",
                 after=("login",)),
    SecretOption(("twine",), ("-p", "--password"), "twine upload -u __token__ -p SECRET dist/*"),
    SecretOption(_MYSQL, ("-p",), "mysql -h db -u root -pSECRET app",
                 separate=False, attached=True),
    SecretOption(_MYSQL, ("--password",), "mysqldump --password=SECRET app"),
    SecretOption(_MONGO, ("-p", "--password"), "mongosh -u admin -p SECRET mongodb://db/app"),
    SecretOption(_REDIS, ("-a",), "redis-cli -h cache -a SECRET ping", attached=True),
    SecretOption(_REDIS, ("--pass",), "redis-cli --pass SECRET ping"),
    SecretOption(("sshpass",), ("-p",), "sshpass -p SECRET ssh deploy@host", attached=True),
    SecretOption(("curl",), ("--oauth2-bearer",), "curl --oauth2-bearer SECRET https://api.x.org"),
    SecretOption(("curl",), ("-E", "--cert", "--proxy-cert"),
                 "curl -E client.pem:SECRET https://api.x.org", part=after_colon),
    SecretOption(("curl",), ("--pass", "--proxy-pass"), "curl --key k.pem --pass SECRET https://x.org"),
    SecretOption(("wget",), ("--password", "--http-password", "--ftp-password", "--proxy-password"),
                 "wget --user ci --password SECRET https://x.org/f"),
    SecretOption(_HTTPIE, ("-a", "--auth"), "http -a deploy:SECRET https://api.x.org",
                 part=after_colon),
    SecretOption(("openssl",), ("-k",), "openssl enc -aes-256-cbc -k SECRET -in a -out b"),
    SecretOption(("openssl",), ("-K", "-hmac"), "openssl enc -aes-128-cbc -K SECRET -iv 00 -in a"),
    SecretOption(("openssl",), ("-pass", "-passin", "-passout", "-password"),
                 "openssl pkcs12 -export -in c.pem -passout pass:SECRET -out c.p12",
                 part=pass_prefix),
    SecretOption(("openssl",), ("-macopt",), "openssl dgst -mac hmac -macopt key:SECRET f",
                 part=after_colon),
    SecretOption(_ZIP, ("-P", "--password"), "zip -P SECRET out.zip notes.txt"),
    SecretOption(_SEVEN_ZIP, ("-p",), "7z a -pSECRET out.7z notes.txt",
                 separate=False, attached=True),
    SecretOption(_RAR, ("-p", "-hp"), "rar a -hpSECRET out.rar notes.txt",
                 separate=False, attached=True),
    SecretOption(_JAVA_KEYS, ("-storepass", "-keypass", "-srcstorepass", "-deststorepass",
                              "-srckeypass", "-destkeypass", "-new"),
                 "keytool -list -keystore ks.jks -storepass SECRET"),
    SecretOption(_SAMBA, ("-U", "--user"), "smbclient //srv/share -U admin%SECRET",
                 attached=True, part=after_percent),
    SecretOption(_LDAP, ("-w",), "ldapsearch -x -D cn=admin -w SECRET uid=ada", attached=True),
    SecretOption(("ldappasswd",), ("-s", "-a"), "ldappasswd -x -D cn=admin -W -s SECRET uid=u"),
    SecretOption(_MSSQL, ("-P",), "sqlcmd -S db -U sa -P SECRET -Q select", attached=True),
    SecretOption(("ssh-keygen",), ("-N", "-P"), "ssh-keygen -t ed25519 -N SECRET -f key"),
    SecretOption(("lftp",), ("-u", "--user"), "lftp -u deploy,SECRET ftp.x.org",
                 part=after_comma),
    SecretOption(("ncftp", "ncftpput", "ncftpget", "ncftpls"), ("-p",),
                 "ncftpput -u deploy -p SECRET ftp.x.org /in f"),
    SecretOption(("gh",), ("-b", "--body"), "gh secret set DEPLOY_KEY -b SECRET",
                 after=("secret",)),
    SecretOption(("kubectl", "oc"), ("--from-literal",),
                 "kubectl create secret generic db --from-literal=password=SECRET",
                 part=after_equals),
    SecretOption(("influx",), ("-t", "--token", "--password"), "influx config create -t SECRET"),
    SecretOption(("doctl",), ("-t", "--access-token"), "doctl auth init -t SECRET"),
    SecretOption(("poetry",), ("pypi-token.pypi",), "poetry config pypi-token.pypi SECRET"),
    SecretOption(("nmcli",), ("password", "wifi-sec.psk", "802-11-wireless-security.psk"),
                 "nmcli device wifi connect home password SECRET"),
)  # fmt: skip

_FIRST_AND_LAST: Final = (0, -1)
POSITIONALS: Final[tuple[SecretPositional, ...]] = (
    SecretPositional(("vault", "bao"), _FIRST_AND_LAST, "vault login SECRET", after=("login",)),
    SecretPositional(("cargo",), _FIRST_AND_LAST, "cargo login SECRET", after=("login",)),
    SecretPositional(("wandb",), _FIRST_AND_LAST, "wandb login SECRET", after=("login",)),
    SecretPositional(("ngrok",), _FIRST_AND_LAST, "ngrok authtoken SECRET",
                     after=("authtoken",)),
    SecretPositional(("ngrok",), _FIRST_AND_LAST, "ngrok config add-authtoken SECRET",
                     after=("add-authtoken",)),
    # htpasswd -b FILE USER PASSWORD; with -n (print, no file) USER PASSWORD.
    SecretPositional(("htpasswd",), (2,), "htpasswd -bc users.htpasswd ada SECRET",
                     when_flags="b", unless_flags="n"),
    SecretPositional(("htpasswd",), (1,), "htpasswd -nbB ada SECRET", when_flags="bn"),
    SecretPositional(("wpa_passphrase",), (1,), "wpa_passphrase home SECRET"),
    SecretPositional(("mc", "mcli"), (3,), "mc alias set store https://s3.x.org AKEY SECRET",
                     after=("alias", "set")),
    SecretPositional(("mc", "mcli"), (3,),
                     "mc config host add store https://s3.x.org AKEY SECRET",
                     after=("host", "add")),
)  # fmt: skip

ARGUMENTS: Final[tuple[SecretArgument, ...]] = (
    SecretArgument(_ORACLE_TOOLS, oracle_login, "sqlplus -S scott/SECRET@orcl @run.sql"),
)

PROGRAMS: Final[frozenset[str]] = frozenset(
    name for rows in (OPTIONS, POSITIONALS, ARGUMENTS) for row in rows for name in row.programs
)
_EXECUTABLE_SUFFIXES: Final = (".exe", ".cmd", ".bat")


def program_name(token: str) -> str:
    """``/usr/bin/MySQL.exe`` -> ``mysql``: what a token names as a program."""
    name = token.rsplit("/", 1)[-1].rsplit("\\", 1)[-1].lower()
    for suffix in _EXECUTABLE_SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def _follows(words: Sequence[str], after: tuple[str, ...]) -> int | None:
    """Where the ``after`` words end in ``words`` (in order, others between), or None."""
    position = 0
    for wanted in after:
        try:
            position = words.index(wanted, position) + 1
        except ValueError:
            return None
    return position


@dataclass(slots=True)
class _Command:
    """One program's stretch of a command line while it is being read."""

    name: str
    words: list[tuple[int, str]]  # positional arguments: (token index, text)
    flags: set[str]  # letters of short flag clusters (-bc: b and c)


def _option_value(token: str, option: SecretOption) -> tuple[int, bool] | None:
    """Where the value starts in ``token`` for ``option`` (and whether it is only the flag,
    its value following), or None when the token is not this option."""
    for flag in option.flags:
        if token == flag:
            return (len(token), True) if option.separate else None
        if token.startswith(flag + "=") and (flag.startswith("--") or option.separate):
            return len(flag) + 1, False
        if option.attached and token.startswith(flag) and len(token) > len(flag):
            return len(flag), False
    return None


def _option_of(command: _Command, token: str) -> tuple[SecretOption, int, bool] | None:
    """The row ``token`` is an option of (for the subcommand seen so far), where its value
    starts in the token, and whether the value is the next token instead."""
    words = [word for _, word in command.words]
    for option in _OPTIONS_BY_PROGRAM.get(command.name, ()):
        if option.after and _follows(words, option.after) is None:
            continue
        found = _option_value(token, option)
        if found is not None:
            return option, *found
    return None


def secret_spans(tokens: Sequence[str]) -> Iterator[tuple[int, int, int]]:
    """``(token index, start, end)`` of every secret the table finds in ``tokens``.

    A value the table judged and found nothing secret in (``openssl -pass env:VAR``) comes
    as an empty span, so that the generic rules do not judge it again.
    """
    command: _Command | None = None
    pending: SecretOption | None = None
    for index, token in enumerate(tokens):
        if pending is not None:
            yield index, *(pending.part(token) or (0, 0))
            pending = None
            continue
        name = program_name(token)
        if name in PROGRAMS and not token.startswith("-"):
            if command is not None:
                yield from _positionals(command)
            command = _Command(name, [], set())
            continue
        if command is None:
            continue
        found = _option_of(command, token)
        if found is not None:
            option, start, alone = found
            if alone:
                pending = option
            else:
                value = option.part(token[start:])
                yield (index, start + value[0], start + value[1]) if value else (index, 0, 0)
            continue
        if token.startswith("-") and len(token) > 1:
            if not token.startswith("--"):
                command.flags.update(token[1:])
            continue
        command.words.append((index, token))
    if command is not None:
        yield from _positionals(command)


def _positionals(command: _Command) -> Iterator[tuple[int, int, int]]:
    words = [w for _, w in command.words]
    for rule in _POSITIONALS_BY_PROGRAM.get(command.name, ()):
        if not set(rule.when_flags) <= command.flags or set(rule.unless_flags) & command.flags:
            continue
        start = _follows(words, rule.after)
        if start is None:
            continue
        # Assignments (username=x password=y) are the assignment rules' to judge.
        candidates = [(i, w) for i, w in command.words[start:] if "=" not in w]
        for position in {
            p % len(candidates) for p in rule.indexes if -len(candidates) <= p < len(candidates)
        }:
            index, word = candidates[position]
            span = rule.part(word)
            if span is not None:
                yield index, *span
    for argument in _ARGUMENTS_BY_PROGRAM.get(command.name, ()):
        for index, word in command.words:
            span = argument.part(word)
            if span is not None:
                yield index, *span


Row = TypeVar("Row", SecretOption, SecretPositional, SecretArgument)


def _by_program(rows: Sequence[Row]) -> dict[str, tuple[Row, ...]]:
    table: dict[str, list[Row]] = {}
    for row in rows:
        for name in row.programs:
            table.setdefault(name, []).append(row)
    return {name: tuple(found) for name, found in table.items()}


_OPTIONS_BY_PROGRAM: Final = _by_program(OPTIONS)
_POSITIONALS_BY_PROGRAM: Final = _by_program(POSITIONALS)
_ARGUMENTS_BY_PROGRAM: Final = _by_program(ARGUMENTS)
