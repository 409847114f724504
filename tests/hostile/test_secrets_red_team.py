"""The red team's secret forms (issue 33): none reaches the store, the outbox, the logs or
a real team collector's PostgreSQL database.

A real ``mplp-lsp watch`` (debug log to a file) forwards to a real ``collector serve`` on
PostgreSQL. ``mplp-lsp run`` records the red team's command lines: docker, mysql, curl,
redis-cli, sshpass, mongosh, http, vault, openssl, zip, 7z, htpasswd, keytool, smbclient
and ldapsearch with a password or token in their arguments (stand-ins of those names print
the output; the programs themselves are not installed here, and what is recorded is the
argv), each printing one more secret form as its output (.netrc lines, Azure's AccountKey=,
hf_, SG., dop_v1_, an S3 presigned URL, an age key). The same text forms go into commit
messages, and the repository ends on a branch named ``fix/password=...`` (the store's meta
table keeps the branch HEAD points to). Every secret is a plain word: only its place says
it is one.
"""

from __future__ import annotations

import os
import shlex
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import postgres
from tests.gitrepo import BASE_ENV, Repo
from tests.support.secrets import CLI, debug_watch, read_all, read_db
from tests.support.waiting import wait_until
from tests.team.conftest import TOKEN, start_collector
from tests.team.conftest import pg_cluster as pg_cluster
from tests.team.conftest import pg_url as pg_url

pytestmark = pytest.mark.e2e

# The argument forms: (the form, its command line with {s} where the secret goes).
ARGV_FORMS = {
    "docker login -p": "docker login -u ci -p {s} registry.example.org",
    "mysql -pPW": "mysql -h db -u root -p{s} app",
    "curl --oauth2-bearer": "curl --oauth2-bearer {s} https://api.example.org",
    "redis-cli -a": "redis-cli -h cache -a {s} ping",
    "sshpass -p": "sshpass -p {s} ssh deploy@host",
    "mongosh -p": "mongosh -u admin -p {s} mongodb://db/app",
    "http -a user:pw": "http -a deploy:{s} https://api.example.org",
    "vault login": "vault login {s}",
    "openssl enc -k": "openssl enc -aes-256-cbc -k {s} -in a -out b",
    "zip -P": "zip -P {s} out.zip notes.txt",
    "7z -pPW": "7z a -p{s} out.7z notes.txt",
    "htpasswd -b": "htpasswd -bc users.htpasswd ada {s}",
    "keytool -storepass": "keytool -list -keystore ks.jks -storepass {s}",
    "smbclient -U user%pw": "smbclient //srv/share -U admin%{s}",
    "ldapsearch -w": "ldapsearch -x -D cn=admin -w {s} uid=ada",
}
# The text forms, as tool output and commit messages.
TEXT_FORMS = {
    ".netrc": "machine api.example.org login deploy password {s}",
    "AccountKey=": "DefaultEndpointsProtocol=https;AccountName=store;AccountKey={s}==;EndpointSuffix=core.windows.net",
    "hf_": "using hf_{s}Ab12Cd34Ef56Gh78Ij90Kl12Mn34",
    "SG.": "SENDGRID SG.{s}Ab12Cd34Ef56.Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34Yz56Ab78Cd90",
    "dop_v1_": "doctl token dop_v1_{hex}",
    "X-Amz-Signature": "GET https://b.s3.amazonaws.com/r.csv?X-Amz-Date=20260101T000000Z&X-Amz-Signature={s}",
    "AGE-SECRET-KEY-1": "AGE-SECRET-KEY-1{age}",
}


def secret(form: str) -> str:
    """A plain word, unique per form: ``Rt7`` and the form's letters and digits."""
    return "Rt7" + "".join(c for c in form if c.isalnum())[:18]


def fill(template: str, form: str) -> str:
    word = secret(form)
    hex_body = (word.encode().hex() * 8)[:64]
    age = ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" * 2)[:40] + "".join(
        c for c in word.upper() if c in "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
    ).ljust(18, "Q")
    return template.format(s=word, hex=hex_body, age=age)


def needles() -> dict[str, bytes]:
    found = {form: secret(form).encode() for form in (*ARGV_FORMS, *TEXT_FORMS)}
    found["dop_v1_"] = fill("{hex}", "dop_v1_").encode()
    found["AGE-SECRET-KEY-1"] = fill("{age}", "AGE-SECRET-KEY-1").encode()
    found["branch password="] = b"Rt7branchpw"
    return found


def leaks(blob: bytes) -> list[str]:
    return sorted(form for form, needle in needles().items() if needle in blob)


def stand_ins(folder: Path) -> Path:
    """Programs of the red team's names that print what they are told to."""
    folder.mkdir()
    for command in ARGV_FORMS.values():
        program = folder / command.split()[0]
        program.write_text('#!/bin/sh\nprintf "%s\\n" "$MPLP_TEST_OUTPUT"\n')
        program.chmod(0o755)
    return folder


def collector_database(cluster: postgres.Cluster, url: str) -> bytes:
    """Every row of every table of the collector's database, as text."""
    with psycopg.connect(cluster.psql_url(url.rsplit("/", 1)[1])) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        ]
        chunks = [
            repr(row).encode()
            for table in tables
            for row in conn.execute(f'SELECT * FROM "{table}"'.encode())
        ]
    return b"\n".join(chunks)


def test_the_red_teams_secret_forms_reach_no_store_log_or_team_collector(
    tmp_path: Path, pg_url: str, pg_cluster: Any
) -> None:
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    repo = Repo.create(tmp_path / "ws")
    repo.commit("initial")
    workspace, state, log_file = repo.path, tmp_path / "state", tmp_path / "watch.log"
    bin_dir = stand_ins(tmp_path / "bin")
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path}
    watch = debug_watch(workspace, state, collector.url, log_file, TOKEN, PATH=path)
    try:
        outputs = [fill(template, form) for form, template in TEXT_FORMS.items()]
        for (form, command), output in zip(ARGV_FORMS.items(), outputs * 3, strict=False):
            subprocess.run(
                [CLI, "run", "--workspace", str(workspace), "--state-dir", str(state), "--",
                 *shlex.split(fill(command, form))],
                cwd=workspace, env={**env, "MPLP_TEST_OUTPUT": output},
                capture_output=True, timeout=120, check=True,
            )  # fmt: skip
        git_env = {"PATH": os.environ["PATH"], **BASE_ENV, "HOME": str(tmp_path)}
        for output in outputs:
            subprocess.run(
                ["git", "commit", "-q", "--allow-empty", "-m", f"deploy notes\n\n{output}"],
                cwd=workspace, env=git_env, check=True, timeout=60,
            )  # fmt: skip
        subprocess.run(
            ["git", "checkout", "-q", "-b", "fix/password=Rt7branchpw"],
            cwd=workspace, env=git_env, check=True, timeout=60,
        )  # fmt: skip
        (workspace / "after.txt").write_text("on the branch\n")

        def forwarded() -> bool:
            stored = collector_database(pg_cluster, pg_url)
            return (
                stored.count(b"tool_kind") >= len(ARGV_FORMS)
                and b"after.txt" in stored
                and b"fix/password=" in stored
            )

        wait_until(forwarded, timeout=120)
    finally:
        watch.send_signal(signal.SIGINT)
        watch.wait(60)
        collector.stop()

    # Everything the store keeps but the content snapshots (file bytes, never forwarded).
    with sqlite3.connect(f"file:{state / 'events.db'}?mode=ro", uri=True) as conn:
        names = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
    stored = read_db(state / "events.db", tables=tuple(n for n in names if n != "psg_snapshots"))
    assert b"after.txt" in stored and b"fix/password=" in stored, "nothing recorded"
    report = {
        "store (events, outbox, meta, git_refs, graph)": leaks(stored),
        "integration error log": leaks(read_all(state, "integration-errors.jsonl*")),
        "watch debug log": leaks(log_file.read_bytes()),
        "team collector's PostgreSQL": leaks(collector_database(pg_cluster, pg_url)),
    }
    assert report == {name: [] for name in report}
