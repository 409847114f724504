"""``mplp-lsp collector serve --db postgresql://...``: the team's collector on PostgreSQL.

The URL never carries the password (a process's arguments are visible to other users): it
comes from ``PGPASSWORD``/a pgpass file (libpq's own environment) or ``--db-password-file``.
The token comes from the environment or ``--token-file``; there is no database file to
keep a generated one beside.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mplp_lsp.cli.collector_serving import TOKEN_ENV, fail, given_token, serve_until_stopped

__all__ = ["run_team"]


def run_team(args: argparse.Namespace) -> int:
    try:
        import psycopg

        from mplp_lsp.collector.pg_connect import url_problem
        from mplp_lsp.collector.team_app import (
            DEFAULT_DEPLOY_PIPELINES,
            TeamSettings,
            run_team_collector,
        )
        from mplp_lsp.collector.team_names import AliasFileError, Naming, load_aliases
    except ImportError:
        return fail("PostgreSQL support is not installed: pip install 'mplp-lsp[postgres]'")
    problem = url_problem(args.db)
    if problem is not None:
        return fail(problem)
    if args.retention_days is not None and args.retention_days < 1:
        return fail("--retention-days must be at least 1")
    if args.db_pool_size is not None and not 1 <= args.db_pool_size <= 1000:
        return fail("--db-pool-size must be between 1 and 1000")
    if args.db_timeout is not None and not 0.1 <= args.db_timeout <= 600:
        return fail("--db-timeout must be between 0.1 and 600 seconds")
    try:
        aliases = load_aliases(Path(args.aliases).expanduser()) if args.aliases else {}
    except AliasFileError as error:
        return fail(str(error))
    try:
        token = given_token(args)
        password = _first_line(args.db_password_file) if args.db_password_file else None
        read_tokens = _lines(args.read_token_file) if args.read_token_file else []
    except OSError as error:
        return fail(f"cannot read a token or password file: {error.strerror or error}")
    if not token:
        return fail(f"the token is empty; set {TOKEN_ENV} or --token-file")
    settings = TeamSettings(
        args.db,
        token,
        read_tokens=read_tokens,
        password=password,
        retention_days=args.retention_days,
        pool_size=args.db_pool_size or 8,
        db_timeout=args.db_timeout or 5.0,
        naming=Naming(args.names or "hashed", aliases),
        deploy_pipelines=args.deploy_pipeline or DEFAULT_DEPLOY_PIPELINES,
        require_stream_keys=args.require_stream_keys,
    )

    try:
        serve_until_stopped(
            lambda ready: run_team_collector(settings, args.host, args.port, ready=ready),
            "db: PostgreSQL",
        )
    except (psycopg.Error, TimeoutError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return fail(f"cannot use the PostgreSQL database: {first}")
    except OSError as error:
        return fail(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}")
    return 0


def _first_line(name: str) -> str:
    lines = Path(name).expanduser().read_text(encoding="utf-8").splitlines()
    return lines[0] if lines else ""


def _lines(name: str) -> list[str]:
    text = Path(name).expanduser().read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]
