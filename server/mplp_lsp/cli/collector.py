"""``mplp-lsp collector serve``: run the reference remote runtime."""

from __future__ import annotations

import argparse
import os
import secrets
import sqlite3
import sys
from pathlib import Path
from typing import Any, Final

from mplp_lsp.cli.collector_serving import TOKEN_ENV, fail, given_token, serve_until_stopped
from mplp_lsp.cli.common import add_log_options, configure_logging, port

_COLLECTOR_LOG_LEVEL = "info"  # a service: what it serves and refuses is worth a line

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
_TEAM_ONLY: Final = (
    "db_password_file",
    "read_token_file",
    "retention_days",
    "db_pool_size",
    "db_timeout",
    "names",
    "aliases",
    "deploy_pipeline",
)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "collector",
        help="run the reference remote runtime that forwarders deliver to",
        description="The reference remote runtime for forwarded MPLP envelopes.",
    )
    actions = parser.add_subparsers(dest="collector_command", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve",
        help="receive, validate, deduplicate and store forwarded batches",
        description=(
            "Receive batches on POST /events, validate every envelope, store each event "
            "once by its event_id, honour Idempotency-Key, store to SQLite, and serve them on "
            "GET /events. Every request needs 'Authorization: Bearer <token>'; the token "
            f"comes from {TOKEN_ENV}, else --token-file, else <db>.token (used only if it "
            "is yours and private; else a new random one is written there, mode 0600). "
            "With --db postgresql://... several instances share one PostgreSQL database "
            "and keep the team project graph (docs/team.md); the token must then come from "
            "the environment or --token-file."
        ),
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=port, default=8765, help="port (0: any free port)")
    serve.add_argument(
        "--db",
        default="collector.db",
        help="SQLite database file, or a postgresql:// URL without a password",
    )
    serve.add_argument("--token-file", metavar="FILE", help="file holding the token")
    serve.add_argument(
        "--require-stream-keys",
        action="store_true",
        help=(
            "refuse batches without an Mplp-Stream-Key (forwarders from before stream keys "
            "send none); by default a stream that no key ever wrote stays writable without one"
        ),
    )
    team = serve.add_argument_group("PostgreSQL (--db postgresql://...)")
    team.add_argument(
        "--db-password-file",
        metavar="FILE",
        help="file holding the database password (else PGPASSWORD or a pgpass file)",
    )
    team.add_argument(
        "--read-token-file",
        metavar="FILE",
        help="file with read-only tokens, one a line (dashboards: GET only)",
    )
    team.add_argument(
        "--retention-days",
        type=int,
        metavar="N",
        help="drop raw events received over N days ago (hourly); the team graph is kept",
    )
    team.add_argument(
        "--db-pool-size",
        type=int,
        metavar="N",
        help="database connections of this instance at most (default 8)",
    )
    team.add_argument(
        "--db-timeout",
        type=float,
        metavar="SECONDS",
        help="the longest a request waits for a database connection before a 503 (default 5)",
    )
    team.add_argument(
        "--names",
        choices=("hashed", "names"),
        help="how the team view names people and machines: short hashes (default) or names",
    )
    team.add_argument(
        "--aliases",
        metavar="FILE",
        help='TOML file of "<short hash>" = "Name" pairs the team view shows instead',
    )
    team.add_argument(
        "--deploy-pipeline",
        action="append",
        metavar="GLOB",
        help="a pipeline id pattern whose successful runs are deployments (DORA keys; "
        "repeatable; default: *deploy* and *release*)",
    )
    add_log_options(serve)
    parser.set_defaults(handler=run)
    dashboard = actions.add_parser(
        "ui",
        help="log a browser in to a team collector's dashboard (--open: open it)",
        description=(
            "Ask a PostgreSQL collector for a one-time login code, write a page that hands it "
            "to the team dashboard (/ui/) into a folder of yours (readable by you only), and "
            "print that page's file:// URL. The token (the collector's, or a read-only one) "
            f"comes from {TOKEN_ENV}, else --token-file. The page logs one browser in once, "
            "within a minute; the session can only load the team page. Every instance "
            "honours the link and the session: behind a balancer, use the balancer's address."
        ),
    )
    dashboard.add_argument("url", help="the collector's base URL, e.g. http://127.0.0.1:8765")
    dashboard.add_argument("--token-file", metavar="FILE", help="file holding the token")
    dashboard.add_argument("--open", action="store_true", help="open the page in a web browser")
    dashboard.set_defaults(handler=run_ui)


def run_ui(args: argparse.Namespace) -> int:
    import urllib.error

    from mplp_lsp.cli.ui import hand_over, request_code
    from mplp_lsp.engine.private import NotPrivate
    from mplp_lsp.ui.login_page import collector_login_folder

    try:
        token = given_token(args)
    except OSError as error:
        return fail(f"cannot read the token file: {error}")
    if not token:
        return fail(f"no token: set {TOKEN_ENV} or give --token-file")
    problem = _insecure(args.url)
    if problem is not None:
        return fail(problem)
    try:
        folder = collector_login_folder()
    except (NotPrivate, OSError) as error:
        return fail(str(error))
    try:
        login = request_code(args.url, token)
    except urllib.error.HTTPError as error:
        return fail(_refusal(args.url, error.code))
    except (OSError, urllib.error.URLError, ValueError, KeyError) as error:
        return fail(f"the collector at {args.url} did not give a login code: {error}")
    hand_over(login, folder, open_it=args.open)
    return 0


def _refusal(url: str, status: int) -> str:
    """Why the collector gave no login code, and what to do."""
    if status == 404:
        return (
            f"the collector at {url} has no team dashboard: only a collector on PostgreSQL "
            "(mplp-lsp collector serve --db postgresql://...) serves one; a SQLite collector "
            "only receives envelopes"
        )
    if status in (401, 403):
        return (
            f"the collector at {url} refused the token (HTTP {status}): give its token "
            f"or a read-only one ({TOKEN_ENV} or --token-file)"
        )
    return f"the collector at {url} did not give a login code (HTTP {status})"


def _insecure(url: str) -> str | None:
    """Why the token may not be sent to ``url``: it would travel in clear, or to a URL
    that holds credentials itself."""
    from urllib.parse import urlsplit

    from mplp_lsp.forward.remote import is_loopback_host

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return f"not a URL: {url}"
    if "@" in parts.netloc or not host:
        return "the collector URL needs a host and no user name or password"
    if parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(host)):
        return None
    return (
        "the collector URL must be https://, or http:// to this machine "
        "(the token would travel in clear)"
    )


def run(args: argparse.Namespace) -> int:
    configure_logging(collector_log_level(args.log_level), args.log_file)
    if args.db.startswith(POSTGRES_SCHEMES):
        from mplp_lsp.cli.collector_team import run_team

        return run_team(args)
    team_only = [name for name in _TEAM_ONLY if getattr(args, name) is not None]
    if team_only:
        given = ", ".join("--" + name.replace("_", "-") for name in team_only)
        return fail(f"{given}: only with a PostgreSQL --db")
    db = Path(args.db).expanduser().absolute()
    if not db.parent.is_dir():
        return fail(f"the folder of --db does not exist: {db.parent}")
    from mplp_lsp.engine.private import NotPrivate

    try:
        token = _token(args, db)
    except NotPrivate as error:
        return fail(f"{error}; remove it, or give the token with {TOKEN_ENV} or --token-file")
    except OSError as error:
        return fail(f"cannot read or create the token file: {error}")
    if not token:
        return fail(f"the token is empty; set {TOKEN_ENV} or put one in the token file")
    from mplp_lsp.store.database import make_private

    try:
        make_private(db)
    except OSError as error:  # another user's file (or a link) where the database goes
        return fail(f"cannot make the database {db} private to you: {error}")
    from mplp_lsp.collector.app import run_collector

    try:
        serve_until_stopped(
            lambda ready: run_collector(
                db,
                token,
                args.host,
                args.port,
                ready=ready,
                require_stream_keys=args.require_stream_keys,
            ),
            f"db: {db}",
        )
    except sqlite3.Error as error:
        return fail(f"cannot use the database {db}: {error}")
    except OSError as error:  # the address: taken, or not one of this machine's
        return fail(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}")
    return 0


def _token(args: argparse.Namespace, db: Path) -> str:
    """The token given, else the one in ``<db>.token``, else a new one written there.

    ``<db>.token`` is the collector's own file: it is used only if it is this user's and
    private (:func:`~mplp_lsp.engine.private.read_private`), since a file another user put there
    first (a ``--db`` in a shared folder such as ``/tmp``) holds a token they know.
    """
    from mplp_lsp.engine.private import read_private

    given = given_token(args)
    if given is not None:
        return given
    path = db.with_name(db.name + ".token")
    if path.exists() or path.is_symlink():
        return read_private(path).decode("utf-8", errors="replace").strip()
    token = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    print(f"collector token written to {path}", file=sys.stderr, flush=True)
    return token


def collector_log_level(flag: str | None) -> str:
    """``--log-level``, else the logLevel the user set (user file, environment), else info.
    A collector serves no workspace: only user-level sources apply."""
    if flag is not None:
        return flag
    from mplp_lsp.config import resolve

    resolved = resolve(None)
    if resolved.origin("logLevel") == "default":
        return _COLLECTOR_LOG_LEVEL
    return resolved.settings.log_level
