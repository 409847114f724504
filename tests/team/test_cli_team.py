"""``collector serve`` refuses PostgreSQL-only options without a PostgreSQL --db, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import postgres


def test_the_postgresql_suite_can_run(pg_cluster: postgres.Cluster) -> None:
    """Skips with the reason when this machine cannot run tests/team (fails with CI=true)."""
    assert pg_cluster.port > 0


@pytest.mark.parametrize(
    "option",
    [
        ["--retention-days", "3"],
        ["--read-token-file", "t"],
        ["--db-password-file", "p"],
        ["--db-pool-size", "4"],
        ["--db-timeout", "2"],
        ["--names", "names"],
        ["--aliases", "a.toml"],
        ["--deploy-pipeline", "ship*"],
    ],
)
def test_postgres_options_need_a_postgres_db(tmp_path: Path, option: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mplp_lsp", "collector", "serve", "--port", "0", *option],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "MPLP_LSP_COLLECTOR_TOKEN": "t"},
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == f"mplp-lsp collector: {option[0]}: only with a PostgreSQL --db"
    assert not (tmp_path / "collector.db").exists()


def test_a_token_must_be_given_for_postgres(tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install '.[postgres]')")
    env = {k: v for k, v in os.environ.items() if k != "MPLP_LSP_COLLECTOR_TOKEN"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mplp_lsp",
            "collector",
            "serve",
            "--db",
            "postgresql://u@127.0.0.1:1/d",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "mplp-lsp collector: the token is empty; set MPLP_LSP_COLLECTOR_TOKEN or --token-file"
    )
