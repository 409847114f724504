"""The table of password options of common programs, row by row (sanitize/cli_options.py).

Each row's own example command line, with a random secret where it says SECRET, loses the
secret and nothing else: as an argument vector (the program given as argv[0] and, as a
wrapper would run it, among the arguments) and as a command line quoted in text.
"""

from __future__ import annotations

import shlex

import pytest

from mplp_lsp.sanitize.cli_options import (
    ARGUMENTS,
    OPTIONS,
    POSITIONALS,
    SecretArgument,
    SecretOption,
    SecretPositional,
)
from mplp_lsp.sanitize.redact import redact, redact_args

Row = SecretOption | SecretPositional | SecretArgument
ROWS: list[Row] = [*OPTIONS, *POSITIONALS, *ARGUMENTS]
SECRET = "Hx7plainword"  # a human-made password: nothing but its place says it is one


def row_id(row: object) -> str:
    return str(getattr(row, "example", row)).split(" SECRET")[0]


def argv_of(example: str) -> list[str]:
    return shlex.split(example.replace("SECRET", SECRET))


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_each_row_hides_its_secret_in_an_argument_vector(row: Row) -> None:
    argv = argv_of(row.example)
    redacted = redact_args(argv[1:], program=argv[0])
    assert not any(SECRET in item for item in redacted), redacted
    # Only the secret went: every other argument is as it was.
    changed = [i for i, (a, b) in enumerate(zip(argv[1:], redacted, strict=True)) if a != b]
    assert len(changed) == 1 and "[REDACTED:" in redacted[changed[0]], redacted
    assert redact_args(redacted, program=argv[0]) == redacted
    # Run through a wrapper, and given by path: the program is found among the arguments.
    wrapped = redact_args(["-u", "deploy", f"/usr/bin/{argv[0]}", *argv[1:]], program="sudo")
    assert not any(SECRET in item for item in wrapped), wrapped


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_each_row_hides_its_secret_in_a_command_line_in_text(row: Row) -> None:
    line = shlex.join(argv_of(row.example))
    for text in (line, f"$ {line}\nexit 0", f"ran `{line}` before the deploy", f"sh -c '{line}'"):
        redacted = redact(text)
        assert SECRET not in redacted, redacted
        assert redact(redacted) == redacted


HARMLESS = [
    "docker run -p 8080:80 nginx",
    "docker exec -it db psql -p 5432",
    "mysql -p app",  # -p alone asks for the password; app is the database
    "ssh -p 22 deploy@host",
    "7z a -p out.7z notes.txt",
    "curl -E client.pem https://api.example.org",
    "http -a deploy https://api.example.org",
    "openssl enc -pass env:PASS -in a -out b",
    "htpasswd -c users.htpasswd ada",
    "vault login -method=github",
    "sqlplus /nolog @run.sql",
    "unzip -l release.zip",
    "kubectl create secret generic db --from-file=password.txt",
    "mc ls store/bucket",
    "git commit -m zip",
    "redis-cli -h cache ping",
]


@pytest.mark.parametrize("command", HARMLESS)
def test_commands_without_a_secret_are_left_alone(command: str) -> None:
    argv = shlex.split(command)
    assert redact_args(argv[1:], program=argv[0]) == argv[1:]
    assert redact(command) == command
