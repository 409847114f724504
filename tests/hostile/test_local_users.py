"""Another user of the same machine, attacking the daemon's owner (docs/threat-model.md).

A real second local user (``local_user.py``: useradd under CI=true) runs the attacker's
code, with the system's Python, as its own uid:

* ``mplp-lsp ui --open`` starts the browser with a URL in its argv, which every local
  user can read (``/proc/<pid>/cmdline``): a ``BROWSER`` script records that argv where
  the attacker can read it, and the attacker tries everything in it (following a link,
  posting a code, reading a file it names). Nothing yields a session; the owner's real
  browser (Debian's Chromium), given the same argv, logs in.
* A state dir the attacker created first (``MPLP_LSP_STATE_DIR=/tmp/...``), with an
  ``api.json`` naming the attacker's listener and the victim's private key as the token
  file, and a process holding its lock: ``status`` and ``ui`` refuse the folder, naming
  it, and the listener never hears from them.
* A state dir that others may write (mode 0777, or inside a folder the attacker owns) is
  refused with the path and the fix, before anything in it is read or written.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, launched_browser
from tests.hostile.local_user import LocalUser, second_user, shared_folder
from tests.support.waiting import wait_until
from tests.ui.daemon import Watch, base_env

pytestmark = pytest.mark.e2e

# The attacker's side of the login: everything the recorded argv holds, tried every way.
ATTACK_LOGIN = r"""
import json, re, sys, urllib.error, urllib.parse, urllib.request

argv_file, base = sys.argv[1], sys.argv[2]
items = open(argv_file).read().split()
report = {"items": items, "readable": [], "refused": [], "sessions": []}

class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None

opener = urllib.request.build_opener(Stay)

def call(method, url, body=None, headers=None):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with opener.open(request, timeout=10) as answer:
            return answer.status, answer.headers.get_all("Set-Cookie") or []
    except urllib.error.HTTPError as answer:
        return answer.code, answer.headers.get_all("Set-Cookie") or []
    except OSError:
        return None, []

def cookies(found):
    return "; ".join(cookie.split(";", 1)[0] for cookie in found)

def works(cookie):
    for fetch in ({}, {"Sec-Fetch-Site": "none"}, {"Sec-Fetch-Site": "same-origin"}):
        status, _ = call("GET", base + "/ui/api/timeline", headers={"Cookie": cookie, **fetch})
        if status == 200:
            return True
    return False

def redeem(code, link=None):
    if link is not None:  # the link as it is, as curl would follow it
        status, found = call("GET", link)
        if found and works(cookies(found)):
            report["sessions"].append(["link", link])
    status, found = call("GET", base + "/ui/login")  # as the login page would
    headers = {"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin",
               "Origin": base, "Cookie": cookies(found)}
    status, found = call("POST", base + "/ui/login", json.dumps({"code": code}).encode(), headers)
    if found and works(cookies(found)):
        report["sessions"].append(["form", code])

for item in items:
    code = re.search(r"[?#&]code=([\w\-]+)", item)
    if code:
        redeem(code.group(1), item if item.startswith("http") else None)
        continue
    path = urllib.parse.unquote(urllib.parse.urlsplit(item).path) if item.startswith("file:") else item
    if not path.startswith("/"):
        continue
    try:
        text = open(path).read()
    except OSError as error:
        report["refused"].append([path, type(error).__name__])
        continue
    report["readable"].append(path)
    for found in re.findall(r"code=([\w\-]+)", text):
        redeem(found)
print(json.dumps(report))
"""

# The attacker's watch over every process it may look at while the owner logs in: each
# argv and (where readable) environment, gathered until told to stop.
WATCH_PROCESSES = r"""
import os, sys, time
stop = sys.argv[1]
seen = set()
print("watching", flush=True)
while not os.path.exists(stop):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as found:
                    seen.add(found.read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    time.sleep(0.01)
print("\n".join(sorted(seen)))
"""

# The attacker's planted state dir: an endpoint file naming its own listener and the
# victim's key, the lock held (a daemon "runs" there), every request's Authorization kept.
PLANT_STATE_DIR = r"""
import fcntl, http.server, json, os, sys
folder, victim_key = sys.argv[1], sys.argv[2]
os.makedirs(folder, exist_ok=True)
os.chmod(folder, 0o755)
heard = os.path.join(folder, "heard.txt")
open(heard, "w").close()
os.chmod(heard, 0o644)

class Listener(http.server.BaseHTTPRequestHandler):
    def answer(self):
        with open(heard, "a") as out:
            out.write(f"{self.command} {self.path} {self.headers.get('Authorization', '')}\n")
        body = b'{"code": "x", "path": "/ui/login?code=x"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Listener)
lock = open(os.path.join(folder, "daemon.lock"), "w")
os.chmod(lock.name, 0o644)
fcntl.flock(lock, fcntl.LOCK_EX)
lock.write(json.dumps({"pid": os.getpid(), "workspace": None}))
lock.flush()
endpoint = {"url": f"http://127.0.0.1:{server.server_address[1]}", "token_file": victim_key,
            "pid": os.getpid()}
with open(os.path.join(folder, "api.json"), "w") as out:
    json.dump(endpoint, out)
os.chmod(os.path.join(folder, "api.json"), 0o644)
print("planted", flush=True)
server.serve_forever()
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launched_browser(chromium())


def mplp(
    env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str] | None:
    """The CLI's run, or None when it was still running after ``timeout`` (a daemon that
    was not refused)."""
    try:
        return subprocess.run(
            [sys.executable, "-I", "-m", "mplp_lsp", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None


def test_the_browser_ui_open_starts_gives_no_other_user_a_session(browser: Any) -> None:
    attacker = second_user()
    with shared_folder() as shared:
        workspace, state = shared / "workspace", shared / "state"
        workspace.mkdir()
        state.mkdir()
        state.chmod(0o755)  # others may look in: each file's own mode is what protects it
        env = base_env(shared)
        watch = Watch.start(workspace, state, env)
        try:
            recorded = shared / "browser-argv.txt"
            record = shared / "browser.sh"
            # The "browser" stays a while, as a real one does, for the watcher to see it.
            record.write_text(
                f'#!/bin/sh\nprintf "%s\\n" "$@" > {recorded}\nchmod 644 {recorded}\nsleep 1\n'
            )
            record.chmod(0o755)
            stop = shared / "stop-watching"
            script = attacker.python_script(shared, "watch.py", WATCH_PROCESSES)
            watcher = attacker.popen(attacker.python, "-I", str(script), str(stop))
            assert watcher.stdout is not None and watcher.stdout.readline().strip() == "watching"
            opened = mplp({**env, "BROWSER": str(record)}, "ui", "--open", "--state-dir",
                          str(state), "--workspace", str(workspace))  # fmt: skip
            assert opened is not None and opened.returncode == 0, opened
            wait_until(recorded.exists, what="the browser started")
            stop.touch()
            gathered, errors = watcher.communicate(timeout=30)
            assert watcher.returncode == 0, errors
            code = handed_code(state / "ui-login.html")
            assert code not in gathered  # in no process's argv or environment
            assert "ui-login.html" in gathered  # (the watcher did see the browser's argv)
            script = attacker.python_script(shared, "attack.py", ATTACK_LOGIN)
            attack = attacker.run(attacker.python, "-I", str(script), str(recorded), watch.url)
            assert attack.returncode == 0, attack.stderr
            report = json.loads(attack.stdout)
            assert report["items"], report  # the attacker did read the browser's argv
            assert report["sessions"] == [], report
            assert report["readable"] == [], report
            assert set(json.loads((state / "api.json").read_text())) == {"url", "pid"}
            # What the owner's browser was given logs the owner in.
            context = browser.new_context()
            try:
                page = context.new_page()
                page.goto(report["items"][0])
                page.wait_for_url(f"{watch.url}/ui/")
            finally:
                context.close()
            # Once used, the page is worth nothing even to one who later reads it (a copy,
            # a backup, the browser's history): the attacker now gets its text and tries it.
            leaked = shared / "leaked-login.html"
            leaked.write_text((state / "ui-login.html").read_text())
            leaked.chmod(0o644)
            (shared / "leaked.txt").write_text(f"{leaked}\n")
            (shared / "leaked.txt").chmod(0o644)
            attack = attacker.run(
                attacker.python, "-I", str(shared / "attack.py"), str(shared / "leaked.txt"),
                watch.url,
            )  # fmt: skip
            assert attack.returncode == 0, attack.stderr
            report = json.loads(attack.stdout)
            assert report["readable"] == [str(leaked)], report  # it did read the code
            assert report["sessions"] == [], report
        finally:
            watch.stop()


def handed_code(page: Path) -> str:
    """The code a login page hands over (in its URL's fragment)."""
    found = re.search(r"#code=([\w\-]+)", page.read_text())
    assert found is not None
    return found.group(1)


def plant(attacker: LocalUser, shared: Path, folder: Path, victim_key: Path) -> Any:
    script = attacker.python_script(shared, "plant.py", PLANT_STATE_DIR)
    planted = attacker.popen(attacker.python, "-I", str(script), str(folder), str(victim_key))
    assert planted.stdout is not None
    assert planted.stdout.readline().strip() == "planted", planted.stderr
    return planted


def test_a_state_dir_another_user_made_is_refused_and_gets_no_token() -> None:
    attacker = second_user()
    with shared_folder() as shared:
        victim_key = shared / "victim" / ".ssh" / "id_ed25519"
        victim_key.parent.mkdir(parents=True, mode=0o700)
        victim_key.write_text("VICTIM-PRIVATE-KEY-9f3k2\n")
        victim_key.chmod(0o600)
        workspace = shared / "victim" / "project"
        workspace.mkdir()
        # What the victim set MPLP_LSP_STATE_DIR to, made first by the attacker in /tmp.
        theirs = Path(tempfile.mktemp(prefix="mplp-state-", dir="/tmp"))
        planted = plant(attacker, shared, theirs, victim_key)
        try:
            env = {**base_env(shared / "victim"), "MPLP_LSP_STATE_DIR": str(theirs)}
            commands = (["status"], ["status", "--json"], ["ui"], ["ui", "--open"])
            done = [
                mplp({**env, "BROWSER": "true"}, *command, "--workspace", str(workspace))
                for command in commands
            ]
            assert (theirs / "heard.txt").read_text() == ""  # not a single request
            for command, result in zip(commands, done, strict=True):
                assert result is not None and result.returncode != 0, (command, result)
                assert str(theirs) in result.stderr, result.stderr
                assert "belongs to uid" in result.stderr, result.stderr
        finally:
            planted.kill()
            planted.wait()
            shutil.rmtree(theirs, ignore_errors=True)


def test_a_state_dir_inside_another_users_folder_is_refused() -> None:
    attacker = second_user()
    with shared_folder() as shared:
        theirs = Path(tempfile.mktemp(prefix="mplp-theirs-", dir="/tmp"))
        try:
            assert attacker.run("mkdir", "-m", "0755", str(theirs)).returncode == 0
            state = theirs / "state"
            state.mkdir(mode=0o700)  # the victim's own folder, in one the attacker can swap
            workspace = shared / "project"
            workspace.mkdir()
            where = ("--workspace", str(workspace), "--state-dir", str(state))
            done = mplp(base_env(shared), "status", *where)
            assert done is not None and done.returncode != 0
            assert f"inside {theirs}, which belongs to uid {attacker.uid}" in done.stderr
            assert not (state / "events.db").exists()
        finally:
            shutil.rmtree(theirs, ignore_errors=True)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_state_dir_others_can_write_is_refused_with_the_path_and_the_fix(
    tmp_path: Path, mode: int
) -> None:
    workspace, state = tmp_path / "project", tmp_path / "state"
    workspace.mkdir()
    state.mkdir()
    state.chmod(mode)
    where = ("--workspace", str(workspace), "--state-dir", str(state))
    for command in (
        ["status", *where],
        ["events", *where],
        ["ui", *where],
        ["watch", "--no-api", "--state-dir", str(state), str(workspace)],
    ):
        done = mplp(base_env(tmp_path), *command, timeout=30)
        assert done is not None and done.returncode != 0, command
        assert f"chmod go-w {state}" in done.stderr, (command, done.stderr)
    assert list(state.iterdir()) == []  # nothing was written into it


def test_a_collector_database_in_a_shared_folder_takes_nothing_another_user_put_there() -> None:
    """``collector serve --db /tmp/...``: the second user cannot hand the collector a token
    they know (a planted ``<db>.token``) or a database they can read (a planted file), and
    cannot read the ones the collector makes, nor its ``--log-file``."""
    attacker = second_user()
    with shared_folder() as shared:
        env = base_env(shared)
        name = Path(tempfile.mktemp(prefix="mplp-collector-", dir="/tmp")).name
        db, token = Path("/tmp", f"{name}.db"), Path("/tmp", f"{name}.db.token")
        serve = ("collector", "serve", "--db", str(db), "--port", "0")
        try:
            planted = attacker.run("sh", "-c", f"umask 022; echo attacker-knows-it > {token}")
            assert planted.returncode == 0, planted.stderr
            done = mplp(env, *serve, timeout=30)
            assert done is not None and done.returncode != 0, done  # it never served
            assert f"{token} is not a private file of yours" in done.stderr, done.stderr
            assert not db.exists()
            token.unlink()
            planted = attacker.run("sh", "-c", f"umask 0; : > {db}")
            assert planted.returncode == 0, planted.stderr
            done = mplp(env, *serve, timeout=30)
            assert done is not None and done.returncode != 0, done
            assert f"cannot make the database {db} private to you" in done.stderr, done.stderr
            db.unlink()
            token.unlink()
            # Made by the collector itself: none is the second user's to read, its log
            # (paths, names, commands) included.
            log = shared / "collector.log"
            collector = subprocess.Popen(
                [sys.executable, "-I", "-m", "mplp_lsp", *serve, "--log-file", str(log)],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                assert collector.stderr is not None
                said = [collector.stderr.readline() for _ in range(2)]
                assert "collector listening" in said[1], said  # (after the token's path)
                for made in (db, token, log):
                    assert attacker.run("cat", str(made)).returncode != 0, made
                    assert made.stat().st_mode & 0o777 == 0o600, made
            finally:
                collector.terminate()
                collector.wait(timeout=30)
        finally:
            for left in (db, token, Path(f"{db}-wal"), Path(f"{db}-shm")):
                left.unlink(missing_ok=True)
