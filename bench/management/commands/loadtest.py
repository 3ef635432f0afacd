"""`make loadtest`: concurrent agents over HTTP against the production server and its worker.

Starts gunicorn (as `make run` does) and the task worker(s) on a temporary ORCA_HOME (with
ORCA_DATABASE_URL set, on a temporary database of that PostgreSQL server), then runs
N clients, each its own agent, each storing M messages with a context request after every
10th (or none: the ingest benchmark of `make bench`). Checks that every message is stored
exactly once, that nothing answered 5xx and that no "database is locked" surfaced, and reports
requests/s, messages/s, latency percentiles, CPU time per message (what the load cost the
server, the task worker and the clients, whatever else the machine runs) and memory; with
several runs, their medians.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from bench.measure import median_and_range, percentile
from bench.stub_provider import STUB_API_KEY, STUB_MODEL, running_stub_provider
from bench.tempdb import create_database, database_url, drop_database


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(server: HTTPConnection, path: str, body: Any, headers: dict[str, str]) -> tuple[int, str]:
    """POST JSON; the status and the body's text. A closed connection is opened again."""
    server.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    response = server.getresponse()
    return response.status, response.read().decode("utf-8", "replace")


def _rss_mib(pid: int) -> float:
    """Resident memory of a process and its children (gunicorn's workers), from /proc."""
    total = 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return total
    return total + sum(_rss_mib(int(child)) for child in children)


def _cpu_seconds(pid: int) -> float:
    """CPU time (user and system) of a process and its live children, from /proc: what the
    load cost, whatever else the machine runs meanwhile."""
    try:
        # Fields 14 and 15, counted after the command (in parentheses, may hold spaces).
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    return own + sum(_cpu_seconds(int(child)) for child in children)


@dataclass
class Run:
    """What one load run measured, and what it found wrong."""

    seconds: float
    latencies: list[float]
    messages: int  # sent; the stored count is checked per agent
    failures: list[tuple[str, str]]  # (path, what went wrong)
    health: dict[str, Any]  # at the end of the load, before the servers stop
    rss: tuple[float, float]  # server (gunicorn and its workers), task worker; MiB
    cpu: tuple[float, float, float]  # CPU seconds during the load: server, task worker(s),
    # and the clients (this process's threads)
    hung: list[str]
    stored: dict[str, int]  # per agent; negative when some text was stored twice
    embedded: int  # messages with their vector once the servers had stopped
    summaries_waiting: tuple[int, int]  # summary tasks still queued at the stop, of all queued
    locked: int  # "database is locked" in the servers' logs

    def problems(self, clients: int, per_client: int) -> list[str]:
        found = [f"{path}: {problem}" for path, problem in self.failures[:10]]
        found += [f"{command} did not stop within 60 s of SIGTERM" for command in self.hung]
        if self.locked:
            found.append(f"'database is locked' {self.locked} times in the logs")
        if len(self.stored) != clients or any(n != per_client for n in self.stored.values()):
            found.append(f"messages stored per agent: {self.stored}, expected {per_client} each")
        return found


class Command(BaseCommand):
    help = "Load test: concurrent agents storing messages and asking for context over HTTP."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--clients", type=int, default=8)
        parser.add_argument("--messages", type=int, default=500, help="per client")
        parser.add_argument(
            "--context-every",
            type=int,
            default=10,
            help="a context request after every Nth message; 0 for none (ingest only)",
        )
        parser.add_argument(
            "--batch",
            type=int,
            default=0,
            help="messages per call of POST .../messages:batch; 0 for one POST per message",
        )
        parser.add_argument(
            "--mixed",
            action="store_true",
            help="with --batch, only every other client batches; the rest post one by one",
        )
        parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
        parser.add_argument("--task-workers", type=int, default=1, help="db_worker processes")
        parser.add_argument("--runs", type=int, default=1, help="each on a new, empty home")
        parser.add_argument(
            "--stub-latency-ms",
            type=float,
            default=None,
            help="embed through the remote providers' client against a local stand-in "
            "answering after this latency (bench.stub_provider), instead of the configured "
            "provider",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
        every = options["context_every"]
        batch = options["batch"]
        self.stdout.write(
            f"{options['clients']} clients x {options['messages']} messages"
            + (f" (+ a context request every {every} messages)" if every else " (ingest only)")
            + (
                f", {'half the clients' if options['mixed'] else 'each'} in batches of {batch}"
                if batch
                else ", one POST per message"
            )
            + f", gunicorn {options['workers']} workers + {options['task_workers']} task "
            f"worker(s) on {connections['default'].vendor}"
        )
        runs = []
        problems = []
        for number in range(1, options["runs"] + 1):
            run = self._run(options)
            self._report(number, run)
            runs.append(run)
            problems += run.problems(options["clients"], options["messages"])
        if len(runs) > 1:
            self._report_medians(runs)
        for problem in problems:
            self.stdout.write(f"  {problem}")
        if problems:
            raise CommandError("the load test found lost, duplicated or failed requests")

    def _run(self, options: dict[str, Any]) -> Run:
        with (
            tempfile.TemporaryDirectory(prefix="orca-load-") as home,
            _database() as url,
            _provider(options["stub_latency_ms"]) as provider,
        ):
            env = {**os.environ, **provider, "ORCA_HOME": home, "PYTHONUNBUFFERED": "1"}
            env.pop("ORCA_DB_PATH", None)
            env.pop("ORCA_DATA_DIR", None)
            # Each process chooses its settings as under `make run`: the one manage.py chose
            # for this command (with the bench app) is not the server's.
            env.pop("DJANGO_SETTINGS_MODULE", None)
            if url:
                env["ORCA_DATABASE_URL"] = url
            self._manage(env, "migrate", "--no-input")
            keys = [
                self._manage(env, "create_api_key", "--agent", f"load-{c}").strip().splitlines()[-1]
                for c in range(options["clients"])
            ]
            port = _free_port()
            log = Path(home) / "server.log"
            hung: list[str] = []
            with log.open("w") as out:
                servers = self._start(env, port, options, out)
                try:
                    self._wait_ready(port)
                    cpu_before = [_cpu_seconds(process.pid) for process in servers]
                    clients_before = time.process_time()
                    started = time.perf_counter()
                    latencies, failures = self._load(port, keys, options)
                    seconds = time.perf_counter() - started
                    clients_cpu = time.process_time() - clients_before
                    cpu = [
                        _cpu_seconds(process.pid) - before
                        for process, before in zip(servers, cpu_before, strict=True)
                    ]
                    health = httpx.get(f"http://127.0.0.1:{port}/api/v1/health").json()
                    web, *workers = (_rss_mib(process.pid) for process in servers)
                    worker = sum(workers)
                finally:
                    for process in servers:
                        process.send_signal(signal.SIGTERM)
                    for process in servers:
                        try:
                            process.wait(timeout=60)
                        except subprocess.TimeoutExpired:
                            process.kill()  # reported: a graceful stop should not hang
                            hung.append(" ".join(process.args[-2:]))
            *_, counts, embedded, waiting, queued = self._manage(
                env, "shell", "-c", _COUNT_SCRIPT
            ).splitlines()
            return Run(
                seconds=seconds,
                latencies=latencies,
                messages=options["clients"] * options["messages"],
                failures=failures,
                health=health,
                rss=(web, worker),
                cpu=(cpu[0], sum(cpu[1:]), clients_cpu),
                hung=hung,
                stored={a: int(n) for a, n in (item.split("=") for item in counts.split())},
                embedded=int(embedded),
                summaries_waiting=(int(waiting), int(queued)),
                locked=log.read_text().count("database is locked"),
            )

    def _manage(self, env: dict[str, str], *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            raise CommandError(f"manage.py {args[0]} failed: {result.stderr[-2000:]}")
        return result.stdout

    def _start(
        self, env: dict[str, str], port: int, options: dict[str, Any], out: Any
    ) -> list[Any]:
        """gunicorn, then the task workers."""
        bin_dir = Path(sys.executable).parent
        web = subprocess.Popen(
            [
                str(bin_dir / "gunicorn"),
                "orca_memory.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                # The Procfile's configuration: the access log (into the run's log) is part of
                # a request's cost, and no control socket is shared with the user's own.
                "--config",
                "python:orca_memory.gunicorn_conf",
                "--workers",
                str(options["workers"]),
            ],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        workers = [
            subprocess.Popen(
                [sys.executable, "manage.py", "db_worker"],
                cwd=settings.BASE_DIR,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            for _ in range(options["task_workers"])
        ]
        return [web, *workers]

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2).status_code:
                    return
            except httpx.TransportError:
                time.sleep(0.3)
        raise CommandError("the server did not start within 60 s")

    def _load(
        self, port: int, keys: list[str], options: dict[str, Any]
    ) -> tuple[list[float], list[tuple[str, str]]]:
        latencies: list[float] = []
        failures: list[tuple[str, str]] = []
        lock = threading.Lock()
        every = options["context_every"]

        def client(number: int, key: str) -> None:
            batched = options["batch"] and not (options["mixed"] and number % 2)
            size = options["batch"] if batched else 1
            # The standard library's client, not httpx: the clients share the machine's cores
            # with the server, and httpx cost 2.5 times the CPU per request (1.41 ms against 0.56).
            server = HTTPConnection("127.0.0.1", port, timeout=60)
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            try:
                for start in range(0, options["messages"], size):
                    numbers = range(start, min(start + size, options["messages"]))
                    messages = [
                        {
                            "role": "user" if i % 2 == 0 else "assistant",
                            "content": f"client {number} message {i}: 我喜欢测试 load",
                        }
                        for i in numbers
                    ]
                    calls = [
                        (f"/sessions/s{number}/messages:batch", {"messages": messages})
                        if batched
                        else (f"/sessions/s{number}/messages", messages[0])
                    ]
                    if every and any(i % every == every - 1 for i in numbers):
                        calls.append((f"/sessions/s{number}/context", {"query": "测试"}))
                    for path, body in calls:
                        start_time = time.perf_counter()
                        try:
                            status, text = _post(server, f"/api/v1{path}", body, headers)
                            problem = (
                                f"{status} {text[:200]}"
                                if status >= 400 or "database is locked" in text
                                else None
                            )
                        except (OSError, HTTPException) as exc:
                            server.close()  # the next request opens a new connection
                            problem = f"{type(exc).__name__}: {exc}"
                        elapsed = time.perf_counter() - start_time
                        with lock:
                            latencies.append(elapsed)
                            if problem:
                                failures.append((path, problem))
            finally:
                server.close()

        threads = [threading.Thread(target=client, args=(n, k)) for n, k in enumerate(keys)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return latencies, failures

    def _report(self, number: int, run: Run) -> None:
        embedding = run.health["embedding"]
        self.stdout.write(
            f"run {number}: {len(run.latencies):,} requests in {run.seconds:.1f} s = "
            f"{len(run.latencies) / run.seconds:.0f} req/s, "
            f"{run.messages / run.seconds:.0f} messages/s; latency p50 "
            f"{statistics.median(run.latencies) * 1000:.1f} ms, "
            f"p95 {percentile(run.latencies, 0.95) * 1000:.1f} ms, "
            f"p99 {percentile(run.latencies, 0.99) * 1000:.1f} ms"
        )
        self.stdout.write(
            f"  CPU per message: server {run.cpu[0] / run.messages * 1000:.2f} ms, task worker "
            f"{run.cpu[1] / run.messages * 1000:.2f} ms, clients "
            f"{run.cpu[2] / run.messages * 1000:.2f} ms (load average "
            f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}); messages embedded "
            f"by the stop: {run.embedded:,} ({run.embedded / run.seconds:.0f}/s of the load); "
            f"turn summaries still queued at the stop: {run.summaries_waiting[0]:,} of "
            f"{run.summaries_waiting[1]:,}"
        )
        self.stdout.write(
            f"  RSS after the load: server {run.rss[0]:,.0f} MiB, worker {run.rss[1]:,.0f} MiB; "
            f"embedding provider {embedding['provider']}, {embedding['pending']} rows still "
            f"to embed; 5xx or errors: {len(run.failures)}; 'database is locked' in logs: "
            f"{run.locked}; stored per agent: "
            + " ".join(f"{agent}={n}" for agent, n in run.stored.items())
        )

    def _report_medians(self, runs: list[Run]) -> None:
        def figure(measure: Callable[[Run], float], digits: int = 1) -> str:
            return median_and_range([measure(run) for run in runs], digits)

        self.stdout.write(f"median of {len(runs)} runs (lowest-highest run):")
        self.stdout.write(
            f"  requests/s {figure(lambda r: len(r.latencies) / r.seconds, 0)}; "
            f"messages/s {figure(lambda r: r.messages / r.seconds, 0)}; "
            f"p50 {figure(lambda r: statistics.median(r.latencies) * 1000)} ms; "
            f"p95 {figure(lambda r: percentile(r.latencies, 0.95) * 1000)} ms; "
            f"p99 {figure(lambda r: percentile(r.latencies, 0.99) * 1000)} ms"
        )
        self.stdout.write(
            f"  CPU ms per message: server {figure(lambda r: r.cpu[0] / r.messages * 1000, 2)}; "
            f"task worker {figure(lambda r: r.cpu[1] / r.messages * 1000, 2)}; "
            f"clients {figure(lambda r: r.cpu[2] / r.messages * 1000, 2)}; messages "
            f"embedded per second of the load {figure(lambda r: r.embedded / r.seconds, 0)}"
        )
        self.stdout.write(
            f"  RSS server {figure(lambda r: r.rss[0], 0)} MiB; "
            f"worker {figure(lambda r: r.rss[1], 0)} MiB"
        )


@contextmanager
def _provider(stub_latency_ms: float | None) -> Iterator[dict[str, str]]:
    """The environment that points the servers at the stand-in for a remote provider, while
    it runs; none (the configured provider) without a latency."""
    if stub_latency_ms is None:
        yield {}
        return
    dimension = settings.ORCA.embedding_dim
    with running_stub_provider(latency_ms=stub_latency_ms, dimension=dimension) as url:
        # The OpenAI-compatible provider: SiliconFlow's client (HttpEmbedder, batch 5) without
        # SiliconFlow's chat model, which a SiliconFlow key would also turn on for summaries.
        # The current keys: they win over an operator's own `EMBEDDING_*` variables, which
        # the old ones would not.
        yield {
            "EMBEDDING_PROVIDER": "openai",
            "EMBEDDING_API_KEY": STUB_API_KEY,
            "EMBEDDING_BASE_URL": url,
            "EMBEDDING_MODEL": STUB_MODEL,
            "EMBEDDING_DIMENSION": str(dimension),
        }


@contextmanager
def _database() -> Iterator[str | None]:
    """On PostgreSQL (ORCA_DATABASE_URL), the URL of a new database on that server, dropped
    afterwards; on SQLite None: the run's database is a file in its temporary home."""
    if connections["default"].vendor != "postgresql":
        yield None
        return
    name = create_database("load")
    try:
        yield database_url(settings.ORCA.database_url, name)
    finally:
        drop_database(name)


# Counts each agent's distinct message texts (a duplicate or a loss changes the count), then
# the messages that have their vector: the task worker's embedding during the load (and the
# moment before its stop), as a rate beside the ingest's; then the turn-summary tasks still
# waiting at the stop and all those queued: whether the worker kept up with the load.
_COUNT_SCRIPT = (
    "from django.db.models import Count; from memory.models import MainMessage as M; "
    "rows = M.objects.values('agent_id')"
    ".annotate(n=Count('content', distinct=True), t=Count('id')); "
    "print(' '.join(f\"{r['agent_id']}={r['n'] if r['n'] == r['t'] else -r['t']}\" "
    "for r in rows.order_by('agent_id'))); "
    "print(M.objects.filter(has_embedding=True).count()); "
    "from django_tasks_db.models import DBTaskResult as T; from memory import scheduling; "
    "summaries = T.objects.filter(task_path=scheduling.SUMMARIZE_TURN); "
    "print(summaries.filter(status='READY').count()); print(summaries.count())"
)
