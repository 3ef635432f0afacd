"""`make loadtest`: concurrent agents over HTTP against the production server and its worker.

Starts gunicorn (as `make run` does) and the task worker on a temporary ORCA_HOME, then runs
N clients, each its own agent, each storing M messages with a context request after every
10th. Checks that every message is stored exactly once, that nothing answered 5xx and that
no "database is locked" surfaced, and reports requests/s and latency percentiles.
"""

from __future__ import annotations

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
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

CONTEXT_EVERY = 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


class Command(BaseCommand):
    help = "Load test: concurrent agents storing messages and asking for context over HTTP."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--clients", type=int, default=8)
        parser.add_argument("--messages", type=int, default=500, help="per client")
        parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")

    def handle(self, *args: Any, **options: Any) -> None:
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
        with tempfile.TemporaryDirectory(prefix="orca-load-") as home:
            env = {**os.environ, "ORCA_HOME": home, "PYTHONUNBUFFERED": "1"}
            env.pop("ORCA_DB_PATH", None)
            env.pop("ORCA_DATA_DIR", None)
            self._manage(env, "migrate", "--no-input")
            keys = [
                self._manage(env, "create_api_key", "--agent", f"load-{c}").strip().splitlines()[-1]
                for c in range(options["clients"])
            ]
            port = _free_port()
            log = Path(home) / "server.log"
            hung: list[str] = []
            with log.open("w") as out:
                servers = self._start(env, port, options["workers"], out)
                try:
                    self._wait_ready(port)
                    results = self._load(port, keys, options["messages"])
                    results["rss"] = [_rss_mib(process.pid) for process in servers]
                finally:
                    for process in servers:
                        process.send_signal(signal.SIGTERM)
                    for process in servers:
                        try:
                            process.wait(timeout=60)
                        except subprocess.TimeoutExpired:
                            process.kill()  # reported below: a graceful stop should not hang
                            hung.append(" ".join(process.args[-2:]))
            results["hung"] = hung
            counts = self._manage(env, "shell", "-c", _COUNT_SCRIPT).strip().splitlines()[-1]
            self._report(results, counts, log.read_text(), options)

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

    def _start(self, env: dict[str, str], port: int, workers: int, out: Any) -> list[Any]:
        bin_dir = Path(sys.executable).parent
        web = subprocess.Popen(
            [
                str(bin_dir / "gunicorn"),
                "orca_memory.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(workers),
            ],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "db_worker"],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        return [web, worker]

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2).status_code:
                    return
            except httpx.TransportError:
                time.sleep(0.3)
        raise CommandError("the server did not start within 60 s")

    def _load(self, port: int, keys: list[str], messages: int) -> dict[str, Any]:
        latencies: list[float] = []
        failures: list[str] = []
        lock = threading.Lock()

        def client(number: int, key: str) -> None:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}/api/v1",
                headers={"Authorization": f"Bearer {key}"},
                timeout=60,
            ) as http:
                for i in range(messages):
                    calls = [
                        (
                            "post",
                            f"/sessions/s{number}/messages",
                            {
                                "role": "user" if i % 2 == 0 else "assistant",
                                "content": f"client {number} message {i}: 我喜欢测试 load",
                            },
                        )
                    ]
                    if i % CONTEXT_EVERY == CONTEXT_EVERY - 1:
                        calls.append(("post", f"/sessions/s{number}/context", {"query": "测试"}))
                    for method, path, body in calls:
                        start = time.perf_counter()
                        try:
                            response = http.request(method, path, json=body)
                            problem = (
                                f"{response.status_code} {response.text[:200]}"
                                if response.status_code >= 500
                                or "database is locked" in response.text
                                else None
                            )
                        except httpx.HTTPError as exc:
                            problem = f"{type(exc).__name__}: {exc}"
                        elapsed = time.perf_counter() - start
                        with lock:
                            latencies.append(elapsed)
                            if problem:
                                failures.append(f"{path}: {problem}")

        threads = [threading.Thread(target=client, args=(n, k)) for n, k in enumerate(keys)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return {
            "seconds": time.perf_counter() - started,
            "latencies": latencies,
            "failures": failures,
        }

    def _report(
        self, results: dict[str, Any], counts: str, log: str, options: dict[str, Any]
    ) -> None:
        latencies = results["latencies"]
        expected = options["messages"]
        per_agent = dict(item.split("=") for item in counts.split())
        wrong = {a: n for a, n in per_agent.items() if int(n) != expected}
        locked = log.count("database is locked")
        self.stdout.write(
            f"{options['clients']} clients x {expected} messages (+ a context call every "
            f"{CONTEXT_EVERY}), gunicorn {options['workers']} workers + task worker"
        )
        self.stdout.write(
            f"requests {len(latencies)} in {results['seconds']:.1f} s = "
            f"{len(latencies) / results['seconds']:.0f} req/s; latency p50 "
            f"{statistics.median(latencies) * 1000:.1f} ms, p95 {_percentile(latencies, 0.95):.1f} "
            f"ms, p99 {_percentile(latencies, 0.99):.1f} ms"
        )
        self.stdout.write(f"messages stored per agent: {counts}")
        web, worker = results["rss"]
        self.stdout.write(
            f"memory (RSS) after the load: server {web:.0f} MiB, worker {worker:.0f} MiB"
        )
        self.stdout.write(
            f"5xx or errors: {len(results['failures'])}; 'database is locked' in logs: {locked}"
        )
        for command in results["hung"]:
            self.stdout.write(f"  {command} did not stop within 60 s of SIGTERM")
        for failure in results["failures"][:10]:
            self.stdout.write(f"  {failure}")
        failed = results["failures"] or results["hung"] or wrong or locked
        if failed or len(per_agent) != options["clients"]:
            raise CommandError("the load test found lost, duplicated or failed requests")


# Counts each agent's distinct message texts: a duplicate or a loss changes the count.
_COUNT_SCRIPT = (
    "from django.db.models import Count; from memory.models import MainMessage as M; "
    "rows = M.objects.values('agent_id')"
    ".annotate(n=Count('content', distinct=True), t=Count('id')); "
    "print(' '.join(f\"{r['agent_id']}={r['n'] if r['n'] == r['t'] else -r['t']}\" "
    "for r in rows.order_by('agent_id')))"
)
