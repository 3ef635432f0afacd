"""A stand-in for a remote embedding provider, for benchmarks: how fast the worker embeds
through the real client (memory.embeddings.HttpEmbedder) when the vectors come from an API.

`python -m bench.stub_provider --latency-ms 100 --dimension 1024` serves an OpenAI-compatible
`POST /v1/embeddings` (SiliconFlow's protocol) on 127.0.0.1, prints its base URL on the first
line of its output, and answers every call after the given latency with one vector per text,
seeded by the text (the same text always gets the same vector). It costs little CPU, as a
remote provider costs the machine little: the figures are the service's own work plus the
latency chosen. `running_stub_provider` starts it in its own process, so its CPU never counts
as the caller's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

# The API key and model the stub is given: it checks neither, but the service needs both set.
STUB_API_KEY = "stub-provider-key"
STUB_MODEL = "stub-embedding"


def _vector(text: str, dimension: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dimension, dtype=np.float32)
    return (vector / np.linalg.norm(vector)).tolist()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # connections kept, as a provider's API keeps them
    latency_seconds = 0.0
    dimension = 1024

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.endswith("/embeddings"):
            self.send_error(404, "only /embeddings is served here")
            return
        time.sleep(self.latency_seconds)
        data = [
            {"object": "embedding", "index": i, "embedding": _vector(text, self.dimension)}
            for i, text in enumerate(body["input"])
        ]
        answer = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per call otherwise


@contextmanager
def running_stub_provider(*, latency_ms: float, dimension: int) -> Iterator[str]:
    """The stub in a process of its own for the duration; yields its base URL."""
    stub = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.stub_provider",
            "--latency-ms",
            str(latency_ms),
            "--dimension",
            str(dimension),
        ],
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stub.stdout is not None
        yield stub.stdout.readline().strip()
    finally:
        stub.terminate()
        stub.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--dimension", type=int, default=1024)
    options = parser.parse_args()
    _Handler.latency_seconds = options.latency_ms / 1000
    _Handler.dimension = options.dimension
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
