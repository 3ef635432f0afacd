"""Every command README.md and `make run`'s banner print, run as a newcomer runs it: on a fresh
home (a temporary ORCA_HOME), on SQLite, and on the local PostgreSQL of `make run-postgres`
for those whose behaviour depends on the engine (issue 36).

The commands are read from README.md (its `sh` blocks, the code spans naming a `manage.py`
command or a `make` target, the addresses of its "what | where" table) and from the Makefile
(`make run`'s steps and the banner it echoes) as the tests are collected: a command added to
either later is run too, or fails here as not covered until it gets a case below or a line in
NOT_RUN saying why it is not run. The home is made by `make run`'s own steps, read from the
Makefile, and served by its honcho line, as `make run` serves it."""

from __future__ import annotations

import json
import queue
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from django.core.management import get_commands, load_command_class

from tests.helpers import ROOT, last_line, service_env, stop_group
from tests.test_access_log import free_port

pytestmark = pytest.mark.slow

README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
# The address the README and the banner print (make run's default BIND); the tests serve on a
# free port instead and put it in.
DEFAULT_URL = "http://127.0.0.1:8000"

# What is deliberately not run here, and why.
NOT_RUN = {
    "make install": "the installs: this test runs inside them",
    "make test": "the test run itself: this test is part of it",
    "make lint": "part of make test",
    "make browser": "an apt install, run by make test",
    "make gettext": "an apt install, run by make test",
    "make messages": "rewrites the catalogue in git; tests/test_i18n.py runs makemessages",
    "make clean": "deletes .venv, which the suite runs in",
    "make run": "its steps and its honcho line run here, read from the Makefile",
    "make run-postgres": "its steps run here, read from the Makefile",
    "make screenshots": "minutes of Chromium: tests/screenshots.py, run by make screenshots",
    "make loadtest": "minutes of load: tests/test_load.py runs it small",
    "make bench": "an hour of measurement: tests/test_bench_*.py and test_load.py run it small",
    "make bench-postgres": "an hour of measurement, as make bench",
    "make eval": "needs LoCoMo (not in the repository): tests/test_eval_*.py run it small",
    "manage.py eval_locomo": "a measurement: tests/test_eval_locomo.py runs it small",
    "manage.py eval_extractor": "a measurement: tests/test_extraction.py runs it",
    "manage.py eval_floors": "a measurement on LoCoMo (not in the repository)",
    "manage.py convert_locomo": "needs LoCoMo's file (not in the repository): "
    "tests/test_convert_locomo.py runs it",
    "manage.py loadtest": "minutes of load: tests/test_load.py runs it small",
    "manage.py bench_embedding": "a measurement: tests/test_bench_embedding.py runs it small",
    "manage.py bench_knn": "a measurement: tests/test_bench_app.py runs it small",
    "manage.py bench_context": "a measurement: tests/test_bench_app.py runs it small",
    "manage.py bench_text_index": "a measurement on a kept store: tests/test_bench_app.py runs it",
}
# The measurements' documented options are still checked against their parsers
# (test_the_documented_options_are_the_commands_own).


# --- what the README and the banner print ---------------------------------------------------


@dataclass(frozen=True)
class Documented:
    # "manage.py create_api_key", "make test", "curl", "examples/mcp_client.py", "URL /mcp"
    key: str
    text: str  # the line or code span, as printed
    where: str  # "README.md:242", "make run's banner"
    block: str = ""  # the whole `sh` block it is a line of


def keys_in(text: str, *, shell: bool) -> list[str]:
    """The commands a line or code span names; `shell`: a line to run (an sh block, the
    banner), where programs and examples count too, not only manage.py and make."""
    keys = [f"manage.py {name}" for name in re.findall(r"manage\.py\s+([a-z][a-z_]*)", text)]
    if made := re.match(r"make\s+(?:\w+=\S+\s+)*([a-z][\w-]*)", text):
        keys.append(f"make {made[1]}")
    if shell:
        keys += re.findall(r"python\s+(examples/\w+\.py)", text)
        keys += ["curl"] if re.match(r"curl\s", text) else []
    return keys


def urls_in(text: str) -> list[str]:
    """The service's addresses in the text, as `URL <path>`."""
    found = re.findall(re.escape(DEFAULT_URL) + r"(/[\w/.-]*)?", text)
    return [f"URL {path or '/'}" for path in found]


def readme_commands() -> list[Documented]:
    found: list[Documented] = []
    lines = README.read_text(encoding="utf-8").splitlines()
    fence: str | None = None
    block: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if fence == "sh":
                script = "\n".join(text for _, text in block)
                for at, text in block:
                    found += [
                        Documented(key, text, f"README.md:{at}", script)
                        for key in keys_in(text.removeprefix("export "), shell=True)
                    ]
            fence, block = (None, []) if fence is not None else (line[3:].strip(), [])
            continue
        if fence is not None:
            block.append((number, line))
            continue
        for span in re.findall(r"`([^`]+)`", line):
            found += [
                Documented(key, span, f"README.md:{number}") for key in keys_in(span, shell=False)
            ]
        if line.startswith("|") and f"| {DEFAULT_URL}" in line:  # the "what | where" table
            found += [Documented(key, line, f"README.md:{number}") for key in urls_in(line)]
    return found


def recipe(target: str, **values: str) -> list[str]:
    """The Makefile's recipe of `target`, its variables filled as make would with `values`."""
    lines = MAKEFILE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"{target}:(\s|$)", line))
    steps = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        step = line[1:].replace("$$", "\0")
        for name, value in {"BIN": ".venv/bin", "CURDIR": str(ROOT), **values}.items():
            step = step.replace(f"$({name})", value)
        steps.append(step.replace("\0", "$"))
    return steps


def makefile_commands() -> list[Documented]:
    """`make run`'s steps (make prints each as it runs it) and the banner it echoes."""
    found = []
    for step in recipe("run", SITE_URL=DEFAULT_URL, BIND="127.0.0.1:8000"):
        where = "make run's banner" if step.startswith("@echo") else "make run's steps"
        text = step.removeprefix("@echo ").strip('"')
        keys = keys_in(text, shell=True) + re.findall(r"\b(honcho) start\b", text)
        found += [Documented(key, text, where) for key in keys + urls_in(text)]
    return found


def documented() -> dict[str, list[Documented]]:
    by_key: dict[str, list[Documented]] = {}
    for item in readme_commands() + makefile_commands():
        by_key.setdefault(item.key, []).append(item)
    return by_key


DOCUMENTED = documented()


# --- a fresh home, made and served as `make run` does ---------------------------------------

Ran = subprocess.CompletedProcess[str]


@dataclass
class Home:
    path: Path
    engine: str  # "sqlite" or "postgres"
    port: int
    started: list[Ran]  # `make run`'s steps, as they ran
    admin_password: str = ""
    service: subprocess.Popen[bytes] | None = None
    _numbers: Iterator[int] = field(default_factory=lambda: iter(range(1, 1000)))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """A newcomer's environment: ORCA_HOME and nothing of the tests' own settings."""
        environment = service_env(self.path)
        environment.pop("ORCA_EMBEDDING_PROVIDER", None)  # tests/settings.py's "none"
        return environment

    def sh(self, script: str, *, check: bool = True, stdin: str | None = None) -> Ran:
        """`script` as a newcomer types it in the checkout, with this home."""
        result = subprocess.run(
            ["sh", "-ec", script],
            cwd=ROOT,
            env=self.env(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check:
            assert result.returncode == 0, f"{script}\n{result.stdout}\n{result.stderr}"
        return result

    def manage(self, *args: str, check: bool = True, stdin: str | None = None) -> Ran:
        return self.sh(
            " ".join([".venv/bin/python manage.py", *map(shlex.quote, args)]),
            check=check,
            stdin=stdin,
        )

    def name(self, prefix: str) -> str:
        """A name not used before in this home: each case starts on an agent without data,
        and writes files of its own."""
        return f"{prefix}-{next(self._numbers)}"

    def agent(self) -> str:
        return self.name("newcomer")

    def key(self, agent: str) -> str:
        return last_line(self.manage("create_api_key", "--agent", agent))

    def serve(self) -> str:
        """The service, started once by `make run`'s last line (honcho, the Procfile); its URL
        once health answers."""
        if self.service is None:
            (honcho,) = [step for step in run_steps(self) if "honcho start" in step]
            self.service = subprocess.Popen(
                ["sh", "-c", honcho],
                cwd=ROOT,
                env=self.env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.service.poll() is None, "make run's processes stopped"
            try:
                if httpx.get(f"{self.url}/api/v1/health", timeout=5).json()["worker"]["running"]:
                    return self.url
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise AssertionError("the service or its worker did not start within 90 s")

    def health(self) -> dict:
        return httpx.get(f"{self.serve()}/api/v1/health", timeout=30).json()

    def get(self, path: str, key: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.get(f"{self.serve()}{path}", headers=headers, timeout=30)


# What ensure_admin prints on a fresh database: the address, and the password once.
ADMIN_PRINTED = r"Sign in at (\S+) as admin / (\S+)"


def run_steps(home: Home) -> list[str]:
    return recipe("run", SITE_URL=home.url, BIND=f"127.0.0.1:{home.port}")


def made_home(folder: Path, engine: str) -> Home:
    """A fresh home made by `make run`'s steps (after `make run-postgres`'s first on
    PostgreSQL), read from the Makefile; served on demand."""
    made = Home(folder / "orca", engine, free_port(), [])
    steps = [step for step in run_steps(made) if not step.startswith("@")]
    if engine == "postgres":
        steps = [step for step in recipe("run-postgres") if "$(MAKE)" not in step] + steps
    for step in steps:
        if "honcho start" not in step:
            made.started.append(made.sh(step))
    if signed := re.search(ADMIN_PRINTED, started(made, "ensure_admin").stdout):
        made.admin_password = signed[2]
    return made


def stop(made: Home) -> None:
    if made.service is not None:
        stop_group(made.service, signal.SIGTERM)  # honcho stops its processes on TERM
        made.service = None
    if made.engine == "postgres":
        made.manage("local_postgres", "--stop", check=False)


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> Iterator[Callable[[str], Home]]:
    """One home per engine for the module (pytest would make a fixture parametrized per test
    again for each test); the other engine's stopped when one is asked for."""
    made: dict[str, Home] = {}

    def home_of(engine: str) -> Home:
        if engine not in made:
            for other in made.values():
                stop(other)
            made[engine] = made_home(tmp_path_factory.mktemp(engine), engine)
        return made[engine]

    try:
        yield home_of
    finally:
        for each in made.values():
            stop(each)


def said(result: Ran) -> str:
    return result.stdout + result.stderr


def assert_covered(printed: str) -> None:
    """The commands a step prints at start (changepassword, local_postgres --forget) are run
    here too, or said why not."""
    named = keys_in(printed, shell=False)
    # "every manage.py and `make run`": prose, not a command.
    for key in [key for key in named if key.removeprefix("manage.py ") in get_commands()]:
        assert key in CASES or key in NOT_RUN, f"{key}, printed at start, is not covered"


def started(home: Home, command: str) -> Ran:
    """What `make run`'s step running `command` printed."""
    (ran,) = [ran for ran in home.started if f"manage.py {command}" in ran.args[2]]
    return ran


# --- the cases -----------------------------------------------------------------------------

Case = Callable[[Home, list[Documented]], None]
BOTH = ("sqlite", "postgres")


@dataclass(frozen=True)
class Registered:
    run: Case
    engines: tuple[str, ...]


CASES: dict[str, Registered] = {}


def case(*keys: str, engines: tuple[str, ...] = ("sqlite",)) -> Callable[[Case], Case]:
    """Register the function as the case of `keys`; `engines`: where it runs (BOTH when what it
    does depends on the engine)."""

    def register(run: Case) -> Case:
        for key in keys:
            CASES[key] = Registered(run, engines)
        return run

    return register


def shell_lines(documented: list[Documented]) -> list[Documented]:
    return [item for item in documented if item.block]


@case("manage.py local_postgres", engines=BOTH)
def local_postgres(home: Home, documented: list[Documented]) -> None:
    pgdata = home.path / "postgres"
    first = said(started(home, "local_postgres --if-recorded"))
    assert_covered(first)
    if home.engine == "sqlite":
        assert f"database: SQLite, {home.path / 'data' / 'orca.db'}" in first
        assert "nothing to forget" in said(home.manage("local_postgres", "--forget"))
        assert "nothing to stop" in said(home.manage("local_postgres", "--stop"))
        return
    assert f"database: the local PostgreSQL in {pgdata}" in first
    url = (home.path / "local_postgres.url").read_text().strip()
    assert home.health()["database"]["engine"] == "postgresql"
    # --stop, and `make run`'s first step starting it again; --forget, then recorded again.
    assert "Stopped the PostgreSQL server" in said(home.manage("local_postgres", "--stop"))
    assert "the local PostgreSQL" in home.manage("local_postgres", "--if-recorded").stdout
    forgotten = said(home.manage("local_postgres", "--forget"))
    assert "uses SQLite" in forgotten
    assert_covered(forgotten)
    recorded = home.manage("local_postgres")
    assert last_line(recorded) == url
    assert_covered(recorded.stderr)


@case("manage.py migrate", engines=BOTH)
def migrate(home: Home, documented: list[Documented]) -> None:
    migrated = said(started(home, "migrate"))
    assert "Applying memory.0001" in migrated
    assert "WARNINGS" not in migrated  # the server settings local_postgres gives it
    assert "No migrations to apply." in home.manage("migrate", "--no-input").stdout


@case("manage.py collectstatic")
def collectstatic(home: Home, documented: list[Documented]) -> None:
    """The pages' styles are served from what it collected (whitenoise)."""
    page = httpx.get(f"{home.serve()}/admin/login/", timeout=30).text
    styles = re.findall(r'href="(/static/[^"]+[.]css)"', page)
    assert styles
    for path in styles:
        assert httpx.get(f"{home.url}{path}", timeout=30).status_code == 200, path


@case("manage.py ensure_admin", engines=BOTH)
def ensure_admin(home: Home, documented: list[Documented]) -> None:
    signed = re.search(ADMIN_PRINTED, started(home, "ensure_admin").stdout)
    assert signed and signed[1] == f"{home.url}/"
    again = home.manage("ensure_admin", "--url", f"{home.url}/").stdout
    assert f"Sign in at {home.url}/ with your superuser" in again  # no second password
    assert_covered(again)
    assert sign_in(home, "admin", home.admin_password).status_code == 200


def sign_in(home: Home, username: str, password: str, path: str = "/") -> httpx.Response:
    """The dashboard's sign-in with that login, then `path`."""
    with httpx.Client(base_url=home.serve(), timeout=30, follow_redirects=True) as browser:
        form = browser.get("/admin/login/")
        token = browser.cookies["csrftoken"]
        data = {"username": username, "password": password, "csrfmiddlewaretoken": token}
        signed_in = browser.post(form.url.path, data=data, headers={"Referer": str(form.url)})
        assert "sessionid" in browser.cookies, signed_in.text[:500]
        return browser.get(path)


@case("manage.py changepassword")
def changepassword(home: Home, documented: list[Documented]) -> None:
    (line,) = {item.text for item in documented if item.text.startswith(".venv/")}
    new = "a-newcomers-pass-phrase-36"
    assert "changed successfully" in home.sh(line, stdin=f"{new}\n{new}\n").stdout
    home.admin_password = new
    assert sign_in(home, "admin", new).status_code == 200


@case("manage.py createsuperuser")
def createsuperuser(home: Home, documented: list[Documented]) -> None:
    # Interactive as the README prints it; the same without prompts.
    home.sh(
        "DJANGO_SUPERUSER_PASSWORD=another-pass-phrase-36 .venv/bin/python manage.py "
        "createsuperuser --no-input --username second --email second@example.com"
    )
    assert sign_in(home, "second", "another-pass-phrase-36", "/admin/").status_code == 200


@case("manage.py axes_reset_username")
def axes_reset_username(home: Home, documented: list[Documented]) -> None:
    assert "attempts" in home.manage("axes_reset_username", "admin").stdout


@case("manage.py create_api_key", engines=BOTH)
def create_api_key(home: Home, documented: list[Documented]) -> None:
    for item in shell_lines(documented):
        if item.text.startswith(".venv/bin/python manage.py create_api_key"):
            key = last_line(home.sh(item.text))
            assert home.get("/api/v1/sessions", key).status_code == 200
    labelled = home.manage("create_api_key", "--agent", home.agent(), "--name", "laptop")
    assert home.get("/api/v1/sessions", last_line(labelled)).status_code == 200


@case("manage.py revoke_api_key")
def revoke_api_key(home: Home, documented: list[Documented]) -> None:
    created = home.manage("create_api_key", "--agent", home.agent())
    prefix = re.search(r"API key (\S+)…", created.stderr)[1]  # token_urlsafe: - and _ too
    assert "Revoked" in home.manage("revoke_api_key", prefix).stdout
    assert home.get("/api/v1/sessions", last_line(created)).status_code == 401


@case("curl", engines=BOTH)
def curl(home: Home, documented: list[Documented]) -> None:
    key = home.key("my-agent")
    for item in documented:
        line = item.text.replace("orca_...", key).replace(DEFAULT_URL, home.serve())
        listed = json.loads(home.sh(line).stdout)
        assert listed["count"] == 0, listed  # the key's agent's sessions: none yet


def run_example(home: Home, documented: list[Documented]) -> str:
    (script,) = {item.block for item in documented}
    return home.sh(script.replace(DEFAULT_URL, home.serve())).stdout


@case("examples/agent_client.py", engines=BOTH)
def agent_client(home: Home, documented: list[Documented]) -> None:
    shown = run_example(home, shell_lines(documented))
    assert "Context for the next LLM call:" in shown and "long_term: " in shown


@case("examples/mcp_client.py", engines=BOTH)
def mcp_client(home: Home, documented: list[Documented]) -> None:
    shown = run_example(home, shell_lines(documented))
    assert "Remembered #" in shown and "Context for the next LLM call:" in shown
    # Not whether the memory it has just remembered is in that context: before the worker
    # embeds it, its words take it (tests/test_context_recall.py); after, its similarity to
    # "How should I answer?" (0.36 with the default model) decides, close to the floor.
    assert "long_term: " in shown and "Search (lexical):" in shown


@case("honcho", engines=BOTH)
def honcho(home: Home, documented: list[Documented]) -> None:
    """`make run`'s last line: the web server and the worker, from the Procfile."""
    health = home.health()
    assert health["status"] == "ok", health
    assert health["worker"]["running"] == 1


@case("manage.py db_worker", engines=BOTH)
def db_worker(home: Home, documented: list[Documented]) -> None:
    """The worker `make run` starts embeds what is posted."""
    key = home.key(home.agent())
    posted = httpx.post(
        f"{home.serve()}/api/v1/sessions/s1/messages",
        json={"role": "user", "content": "I moved to Lisbon in May."},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    ).json()
    deadline = time.monotonic() + 120
    while not home.get(f"/api/v1/messages/{posted['id']}", key).json()["has_embedding"]:
        assert time.monotonic() < deadline, "the worker did not embed the message in 120 s"
        time.sleep(0.5)


@case("URL /api/v1/health", engines=BOTH)
def health_url(home: Home, documented: list[Documented]) -> None:
    answered = httpx.get(f"{home.serve()}/api/v1/health", timeout=30)
    assert answered.status_code == 200
    engine = {"sqlite": "sqlite", "postgres": "postgresql"}[home.engine]
    assert answered.json()["database"]["engine"] == engine


@case("URL /api/v1/docs")
def docs_url(home: Home, documented: list[Documented]) -> None:
    answered = httpx.get(f"{home.serve()}/api/v1/docs", timeout=30)
    assert answered.status_code == 200 and "swagger" in answered.text.lower()


@case("URL /", "URL /admin/", engines=BOTH)
def dashboard_url(home: Home, documented: list[Documented]) -> None:
    path = documented[0].key.removeprefix("URL ")
    page = sign_in(home, "admin", home.admin_password, path)
    assert page.status_code == 200 and page.url.path == path


@case("URL /mcp", engines=BOTH)
def mcp_url(home: Home, documented: list[Documented]) -> None:
    key = home.key(home.agent())
    answered = httpx.post(
        f"{home.serve()}/mcp",
        content=mcp_lines("tools/list")[2],
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        timeout=30,
    )
    assert answered.status_code == 200
    assert "store_message" in {tool["name"] for tool in answered.json()["result"]["tools"]}


def mcp_lines(*methods: str) -> list[str]:
    """An MCP client's first lines (initialize, initialized), then a request per method."""
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "newcomer", "version": "1"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    messages += [
        {"jsonrpc": "2.0", "id": number, "method": method, "params": {}}
        for number, method in enumerate(methods, 1)
    ]
    return [json.dumps(message) for message in messages]


@case("manage.py mcp_stdio")
def mcp_stdio(home: Home, documented: list[Documented]) -> None:
    """As an MCP client talks to it: stdin stays open until the answer is read (closed at
    once, the server may stop before it answers the request in flight)."""
    process = subprocess.Popen(
        [".venv/bin/python", "manage.py", "mcp_stdio", "--agent", "my-agent"],
        cwd=ROOT,
        env=home.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout], daemon=True
    ).start()
    try:
        process.stdin.write("\n".join(mcp_lines("tools/list")) + "\n")
        process.stdin.flush()
        listed = {}
        while listed.get("id") != 1:  # by its id: it may come before initialize's answer
            listed = json.loads(lines.get(timeout=60))
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    assert "store_message" in {tool["name"] for tool in listed["result"]["tools"]}


@case("manage.py prune_db_task_results")
def prune_db_task_results(home: Home, documented: list[Documented]) -> None:
    for item in documented:
        if item.text.startswith(".venv/"):
            home.sh(item.text)


@case("manage.py shell")
def shell(home: Home, documented: list[Documented]) -> None:
    # Interactive as printed; the same with its code given.
    code = "from django.db import connection; print(connection.vendor)"
    assert last_line(home.manage("shell", "-c", code)) == "sqlite"


def session_files(home: Home) -> Path:
    """A folder of old JSONL session files: the README's example file."""
    folder = home.path.parent / home.name("old-sessions")
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "jsonl" / "trip-planning.jsonl", folder)
    return folder


def an_agent_with_data(home: Home) -> str:
    agent = home.agent()
    home.manage("migrate_jsonl", str(session_files(home)), "--agent", agent)
    return agent


@case("manage.py migrate_jsonl", engines=BOTH)
def migrate_jsonl(home: Home, documented: list[Documented]) -> None:
    (line,) = {item.text for item in shell_lines(documented)}
    folder = session_files(home)
    written = line.replace("~/old-sessions/", f"{folder}/").replace("my-agent", home.agent())
    dry = home.sh(written.replace("[--dry-run]", "--dry-run")).stdout
    imported = home.sh(written.replace(" [--dry-run]", "")).stdout
    assert re.search(r"would import [1-9]", dry) and re.search(r"imported [1-9]", imported)
    assert re.search(r"imported 0", home.sh(written.replace(" [--dry-run]", "")).stdout)
    # The recovery after an outage: the folder the backup keeps, as printed.
    (recovery,) = {item.text for item in documented if "<data_dir>" in item.text}
    kept = home.path / "data" / "jsonl" / "kept-agent"
    kept.mkdir(parents=True)
    (kept / "s1.jsonl").write_text('{"role": "user", "content": "kept during an outage"}\n')
    recovered = recovery.replace("<data_dir>", str(home.path / "data"))
    assert "imported 1" in home.sh(recovered.replace("<agent>", "kept-agent")).stdout


@case("manage.py export_jsonl", engines=BOTH)
def export_jsonl(home: Home, documented: list[Documented]) -> None:
    agent = an_agent_with_data(home)
    out = home.path.parent / f"export-{agent}"
    home.manage("export_jsonl", str(out), "--agent", agent)
    (written,) = (out / agent).iterdir()
    assert written.name == "trip-planning.jsonl" and written.read_text().count("\n") > 3
    home.manage("export_jsonl", str(out / "one"), "--agent", agent, "--session", "trip-planning")
    assert (out / "one" / agent / "trip-planning.jsonl").exists()


def exported(home: Home) -> tuple[str, Path]:
    agent = an_agent_with_data(home)
    archive = home.path.parent / f"{agent}.orca"
    home.manage("export_agent", agent, str(archive))
    return agent, archive


@case("manage.py export_agent", engines=BOTH)
def export_agent(home: Home, documented: list[Documented]) -> None:
    agent, archive = exported(home)
    assert archive.stat().st_mode & 0o777 == 0o600
    assert "trip-planning" in archive.read_text()


@case("manage.py import_agent", engines=BOTH)
def import_agent(home: Home, documented: list[Documented]) -> None:
    _, archive = exported(home)
    copy = home.agent()
    home.manage("import_agent", str(archive), "--agent", copy)
    sessions = home.get("/api/v1/sessions", home.key(copy)).json()
    assert "trip-planning" in json.dumps(sessions)
    refused = home.manage("import_agent", str(archive), "--agent", copy, check=False)
    assert refused.returncode != 0 and "data" in refused.stderr  # an agent holding data


EXPORTS = {
    "chatgpt": [
        {
            "id": "c1",
            "title": "Tea",
            "current_node": "u1",
            "mapping": {
                "u1": {
                    "id": "u1",
                    "parent": None,
                    "children": [],
                    "message": {
                        "id": "u1",
                        "author": {"role": "user"},
                        "create_time": 1709654401.25,
                        "content": {"content_type": "text", "parts": ["我最喜欢喝乌龙茶。"]},
                    },
                }
            },
        }
    ],
    "claude": [
        {
            "uuid": "c2",
            "name": "Trip",
            "chat_messages": [
                {
                    "uuid": "m1",
                    "sender": "human",
                    "text": "I fly to Tokyo in May.",
                    "created_at": "2024-03-01T10:00:00Z",
                }
            ],
        }
    ],
    "memories": [{"text": "User prefers green tea", "type": "preference"}],
}


@case("manage.py import_from", engines=BOTH)
def import_from(home: Home, documented: list[Documented]) -> None:
    for kind, export in EXPORTS.items():
        agent = home.agent()
        path = home.path.parent / f"{kind}.json"
        path.write_text(json.dumps(export, ensure_ascii=False))
        dry = home.manage("import_from", kind, str(path), "--agent", agent, "--dry-run")
        done = home.manage("import_from", kind, str(path), "--agent", agent)
        assert "would import 1" in dry.stdout and "imported 1" in done.stdout, kind
        listed = "/api/v1/memories" if kind == "memories" else "/api/v1/sessions"
        assert home.get(listed, home.key(agent)).json()["count"] == 1, kind


@case("manage.py embed_pending", engines=BOTH)
def embed_pending(home: Home, documented: list[Documented]) -> None:
    an_agent_with_data(home)
    assert "Embedded" in home.manage("embed_pending").stdout
    home.manage("embed_pending", "--enqueue")
    assert home.health()["embedding"]["pending"] == 0


@case("manage.py reembed", engines=BOTH)
def reembed(home: Home, documented: list[Documented]) -> None:
    agent = an_agent_with_data(home)
    rebuilt = home.manage("reembed").stdout
    # How many it embedded itself depends on the running worker, which embeds them too.
    assert "Vector tables rebuilt for local/" in rebuilt, rebuilt
    deadline = time.monotonic() + 60
    while (health := home.health())["embedding"]["pending"]:
        assert time.monotonic() < deadline, health["embedding"]
        time.sleep(0.5)
    assert health["vector_search"]["enabled"], health
    hits = home.get("/api/v1/search?q=trip&mode=vector", home.key(agent)).json()
    assert hits["hits"], hits


@case("manage.py copy_database", engines=BOTH)
def copy_database(home: Home, documented: list[Documented]) -> None:
    an_agent_with_data(home)
    target = home.path.parent / f"{home.name('copy')}.db"
    copied = said(home.manage("copy_database", "--to", str(target)))
    assert target.exists() and "verified" in copied.lower(), copied


@case("manage.py backup", engines=BOTH)
def backup(home: Home, documented: list[Documented]) -> None:
    target = home.path.parent / home.name("backup") / "orca.db"
    backed = home.manage("backup", str(target), check=home.engine == "sqlite")
    if home.engine == "postgres":  # SQLite's online backup: the command says what to use
        assert backed.returncode != 0 and "copy_database" in backed.stderr
        return
    assert "integrity ok" in backed.stdout and target.stat().st_mode & 0o777 == 0o600


# --- the tests -----------------------------------------------------------------------------

# local_postgres last on each engine: on PostgreSQL it stops and starts the server under the
# running service.
KEYS = sorted(
    set(DOCUMENTED) | set(CASES), key=lambda key: (key == "manage.py local_postgres", key)
)
PAIRS = [("sqlite", key) for key in KEYS] + [
    ("postgres", key) for key in KEYS if key in CASES and "postgres" in CASES[key].engines
]


@pytest.mark.parametrize(("engine", "key"), PAIRS, ids=[f"{e}-{k}" for e, k in PAIRS])
def test_each_documented_command_runs_on_a_fresh_home(homes, engine, key):
    documented = DOCUMENTED.get(key)
    assert documented, f"{key} has a case here but README.md and the banner no longer print it"
    if key in NOT_RUN:
        pytest.skip(f"not run: {NOT_RUN[key]}")
    where = ", ".join(sorted({item.where for item in documented}))
    assert key in CASES, (
        f"{key} ({where}) is not covered: give it a case in {Path(__file__).name}, "
        "or a line in NOT_RUN saying why it is not run"
    )
    CASES[key].run(homes(engine), documented)


def test_what_is_not_run_is_still_documented_and_has_no_case():
    assert not set(NOT_RUN) - set(DOCUMENTED), "NOT_RUN names commands no longer printed"
    assert not set(NOT_RUN) & set(CASES)


def test_the_documented_make_targets_exist():
    targets = set(re.findall(r"^([a-z][\w-]*):", MAKEFILE.read_text(), re.MULTILINE))
    named = {key.removeprefix("make ") for key in DOCUMENTED if key.startswith("make ")}
    assert named <= targets, named - targets


def test_the_documented_options_are_the_commands_own():
    """Every `--option` the README prints for a manage.py command is one of its parser's, the
    commands not run here included."""
    commands = get_commands()
    for key, items in DOCUMENTED.items():
        if not key.startswith("manage.py "):
            continue
        name = key.removeprefix("manage.py ")
        assert name in commands, f"{key} ({items[0].where}) is no command"
        parser = load_command_class(commands[name], name).create_parser("manage.py", name)
        known = {option for action in parser._actions for option in action.option_strings}
        for item in items:
            for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", item.text.split(name, 1)[1]):
                assert option in known, f"{item.where}: {item.text}: {option} is not an option"
