"""`manage.py bench_embedding DIR`: the worker's embedding rate beside the model's own.

In a temporary database, stores the first `--messages` turns of `DIR/conversations.jsonl`
(LoCoMo format, as eval_locomo reads it), then for each batch size, with the configured
provider, each the median of `--runs`:
- the model's own rate: `embed()` over the messages' embedding texts, that many per call,
  nothing else;
- the worker's: the vector tables emptied (every message pending again), then the work of
  `embed_pending_task` run after run, as the worker runs it while a backlog remains (rows
  fetched, embedded, their vectors and flags written), until nothing is pending.

`--models NAME...` (or `all`): instead, each bundled model (memory.embeddings.LOCAL_MODELS)
on one thread, as the worker runs it: short texts (the messages) and agent-style ones
(`--long-texts` texts of 300 words: the English assistant replies of tests/data/agent_sessions
run together and cut, bench.compare_minilm.agent_replies) embedded per CPU-second and per
second, batches of 32; the model loaded first, its load time reported.

`--stub-latency-ms MS`: instead of the configured provider, the remote providers' client
(HttpEmbedder, SiliconFlow's and OpenAI's, batch 5) against a local stand-in that answers
after MS (bench.stub_provider): what a remote provider's rate leaves of the worker's.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench.compare_minilm import WORDS, agent_replies
from bench.evaluation import load_conversations
from bench.measure import median_and_range
from bench.stub_provider import STUB_API_KEY, STUB_MODEL, running_stub_provider
from bench.tempdb import use_temporary_database
from memory import embeddings, tasks, vectors
from memory.models import MainMessage


class Command(BaseCommand):
    help = "Embedding throughput: the worker draining a backlog beside the model's own rate."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("data", type=Path, help="a folder holding conversations.jsonl")
        parser.add_argument("--messages", type=int, default=1000)
        parser.add_argument(
            "--batch-sizes",
            type=int,
            nargs="+",
            default=None,
            help="texts per call (default: 5 and the provider's own batch size)",
        )
        parser.add_argument("--runs", type=int, default=3)
        parser.add_argument(
            "--models",
            nargs="+",
            default=None,
            help="bundled models to compare on short and 300-word texts (or: all)",
        )
        parser.add_argument(
            "--long-texts",
            type=int,
            default=200,
            help="with --models: texts of 300 words, from tests/data/agent_sessions (200)",
        )
        parser.add_argument(
            "--stub-latency-ms",
            type=float,
            default=None,
            help="the remote providers' client against a local stand-in answering after this "
            "latency",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per call otherwise
        if options["models"]:
            self._compare_models(options)
            return
        latency = options["stub_latency_ms"]
        if latency is None:
            self._measure(embeddings.configured_embedder(), options)
            return
        dimension = settings.ORCA.embedding_dim
        with running_stub_provider(latency_ms=latency, dimension=dimension) as url:
            self.stdout.write(f"a stand-in for a remote provider at {url}, {latency:g} ms a call")
            stub = embeddings.HttpEmbedder(
                provider="openai",
                base_url=url,
                api_key=STUB_API_KEY,
                model=STUB_MODEL,
                dimension=dimension,
            )
            self._measure(stub, options)

    def _measure(self, embedder: embeddings.Embedder | None, options: dict[str, Any]) -> None:
        if embedder is None:
            raise CommandError("No embedding provider is configured (EMBEDDING_PROVIDER).")
        sizes = options["batch_sizes"] or sorted({5, embedder.batch_size})
        with tempfile.TemporaryDirectory(prefix="orca-bench-embedding-") as folder:
            use_temporary_database(Path(folder) / "embedding.db")
            stored = load_conversations(
                options["data"] / "conversations.jsonl", limit=options["messages"]
            )
            texts = [vectors.embedding_text(m) for m in MainMessage.objects.order_by("id")]
            embedder.embed(texts[:1])  # the local model loads on its first call
            self.stdout.write(
                f"{stored:,} LoCoMo messages, {embedder.signature}, median of "
                f"{options['runs']} runs (lowest-highest); messages embedded per second:"
            )
            self.stdout.write("batch | model alone | worker draining the backlog | worker/model")
            for size in sizes:
                model, worker = [], []
                for _ in range(options["runs"]):  # in turn, so that both see the same drift
                    model.append(self._model_rate(embedder, texts, size))
                    worker.append(self._worker_rate(embedder, size))
                ratio = statistics.median(worker) / statistics.median(model)
                self.stdout.write(
                    f"{size:>5} | {median_and_range(model, 0)} | {median_and_range(worker, 0)} "
                    f"| {ratio:.0%}"
                )

    def _compare_models(self, options: dict[str, Any]) -> None:
        names = list(embeddings.LOCAL_MODELS) if options["models"] == ["all"] else options["models"]
        models = [embeddings.local_model(name) for name in names]  # ValueError names the others
        with tempfile.TemporaryDirectory(prefix="orca-bench-embedding-") as folder:
            use_temporary_database(Path(folder) / "embedding.db")
            load_conversations(options["data"] / "conversations.jsonl", limit=options["messages"])
            short = [vectors.embedding_text(m) for m in MainMessage.objects.order_by("id")]
        long = agent_replies(options["long_texts"])
        self.stdout.write(
            f"{len(short):,} messages and {len(long)} texts of {WORDS} words, batches "
            f"of {MODEL_BATCH}, one thread, median of {options['runs']} runs (lowest-highest):"
        )
        self.stdout.write("model | load s | short /CPU-s | short /s | 300 words /CPU-s | /s")
        for model in models:
            embedder = embeddings.LocalEmbedder(model)
            started = time.perf_counter()
            embedder.embed(short[:1])
            loaded = time.perf_counter() - started
            rates = [
                [_rates(embedder, texts) for _ in range(options["runs"])] for texts in (short, long)
            ]
            cells = [
                median_and_range([run[i] for run in runs], 1) for runs in rates for i in (0, 1)
            ]
            self.stdout.write(f"{model.name} | {loaded:.1f} | {' | '.join(cells)}")

    def _model_rate(self, embedder: embeddings.Embedder, texts: list[str], size: int) -> float:
        started = time.perf_counter()
        for start in range(0, len(texts), size):
            embedder.embed(texts[start : start + size])
        return len(texts) / (time.perf_counter() - started)

    def _worker_rate(self, embedder: embeddings.Embedder, size: int) -> float:
        vectors.rebuild_index(embedder.signature)
        pending = vectors.pending_count()
        started = time.perf_counter()
        embedded = 0
        while done := vectors.embed_pending(
            embedder=embedder, batch_size=size, limit=tasks.ROWS_PER_RUN
        ):
            embedded += done
        seconds = time.perf_counter() - started
        if embedded != pending:
            raise CommandError(f"embedded {embedded} of {pending} pending rows")
        return embedded / seconds


MODEL_BATCH = 32


def _rates(embedder: embeddings.Embedder, texts: list[str]) -> tuple[float, float]:
    """Texts embedded per CPU-second of this process, and per second."""
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, len(texts), MODEL_BATCH):
        embedder.embed(texts[start : start + MODEL_BATCH])
    return len(texts) / (time.process_time() - cpu), len(texts) / (time.perf_counter() - wall)
