"""`manage.py eval_floors DIR`: where the context's relevance floors (memory.relevance) cut, on
LoCoMo-format data.

Loads the conversations into a fresh temporary database (vectors from the configured provider,
cached as eval_locomo caches them), runs the search the context's recall runs for every
question (hybrid, its 100 candidates), and tells for each hit whether it is an evidence turn.
Prints the similarity and the share of query terms of evidence and other hits, what the
context's floors keep, and for other pairs of floors (a similarity, a share of all the
query's terms) how much of the evidence found stays and how many other hits go.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connections
from django.utils import timezone
from tqdm import tqdm

from bench.evaluation import CachedEmbedder, load_conversations, require_data
from bench.tempdb import use_temporary_database
from memory.context import RECALL_CANDIDATES
from memory.index_schema import query_terms
from memory.relevance import TermMatch, term_match, verdict
from memory.search import SearchQuery, search
from memory.text import message_label
from memory.vectors import embed_pending, query_embedding

SIMILARITY_FLOORS = (None, 0.15, 0.2, 0.25, 0.3)
SHARE_FLOORS = (None, 0.01, 0.25, 0.34, 0.5)


class Command(BaseCommand):
    help = "Measure the context's relevance floors on LoCoMo-format data."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        folder: Path = options["dir"]
        require_data(folder)
        with tempfile.TemporaryDirectory(prefix="orca-floors-") as tmp:
            use_temporary_database(Path(tmp) / "floors.db")
            cached = CachedEmbedder.configured()
            loaded = load_conversations(folder / "conversations.jsonl")
            if cached is not None:
                embed_pending(embedder=cached, batch_size=64)
            rows = self._hits(folder, cached)
            if cached is not None:
                cached.save()
            connections["default"].close()
        self._report(rows, loaded)

    def _hits(self, folder: Path, cached: CachedEmbedder | None) -> list[dict[str, Any]]:
        """One row per (question, hit): evidence or not, its similarity and term share."""
        rows: list[dict[str, Any]] = []
        now = timezone.now()
        with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
            questions = [json.loads(line) for line in lines if line.strip()]
        questions = [q for q in questions if q["evidence"]]
        for number, question in enumerate(tqdm(questions, file=self.stderr._out)):
            embedded = query_embedding(question["question"], cached)
            result = search(
                agent_id=question["conversation_id"],
                query=SearchQuery(question["question"], k=RECALL_CANDIDATES, drop_echoes=False),
                embedded=embedded,
                now=now,
            )
            terms = query_terms(question["question"], now=now)
            for rank, hit in enumerate(result.hits, 1):
                message = hit.message
                label = message_label(message.timestamp, message.role, message.metadata)
                rows.append(
                    {
                        "question": number,
                        "rank": rank,
                        "evidence": message.metadata.get("turn_id") in question["evidence"],
                        "similarity": hit.vector_score,
                        "match": term_match(terms, message.content, label),
                        "floor": embedded.thresholds.floor(
                            embedded.thresholds.relevance, question["question"], message.content
                        ),
                    }
                )
        return rows

    def _report(self, rows: list[dict[str, Any]], loaded: int) -> None:
        evidence = [r for r in rows if r["evidence"]]
        other = [r for r in rows if not r["evidence"]]
        self.stdout.write(
            f"{loaded} messages, {len({r['question'] for r in rows})} questions; "
            f"{len(evidence)} evidence hits, {len(other)} other hits"
        )
        for name, part in (("evidence", evidence), ("other", other)):
            sims = [r["similarity"] for r in part if r["similarity"] is not None]
            shares = [_share(r["match"]) for r in part]
            self.stdout.write(
                f"  {name}: similarity {_quartiles(sims)}; term share {_quartiles(shares)}"
            )
        self.stdout.write(
            "  floors (similarity, term share): evidence hits kept / other hits dropped, "
            "top 30 ranks"
        )
        top = [r for r in rows if r["rank"] <= 30]
        chosen = [r for r in top if _relevant(r)]
        self.stdout.write(f"  the context's floors: {_kept(top, chosen)}")
        for similarity in SIMILARITY_FLOORS:
            cells = []
            for share in SHARE_FLOORS:
                kept = [r for r in top if _passes(r, similarity, share)]
                cells.append(f"{share}: {_kept(top, kept)}")
            self.stdout.write(f"  similarity {similarity}: " + "  ".join(cells))


def _kept(rows: list[dict[str, Any]], kept: list[dict[str, Any]]) -> str:
    """The share of the evidence hits kept / of the other hits dropped."""
    evidence = sum(r["evidence"] for r in rows)
    found = sum(r["evidence"] for r in kept)
    dropped = 1 - (len(kept) - found) / max(1, len(rows) - evidence)
    return f"{found / max(1, evidence):.3f}/{dropped:.3f}"


def _share(match: TermMatch) -> float:
    """The share of all the query's terms, words and bigrams alike."""
    terms = match.words + match.bigrams
    return (match.words_matched + match.bigrams_matched) / terms if terms else 0.0


def _relevant(row: dict[str, Any]) -> bool:
    return verdict(similarity=row["similarity"], floor=row["floor"], match=row["match"]).relevant


def _passes(row: dict[str, Any], similarity: float | None, share: float | None) -> bool:
    """The context's rule (memory.relevance.verdict) with these floors. None: that score
    never qualifies a hit; with both None, every hit passes (no floor at all)."""
    if similarity is None and share is None:
        return True
    close = similarity is not None and (row["similarity"] or 0.0) >= similarity
    said = share is not None and _share(row["match"]) >= share
    return close or said


def _quartiles(values: list[float]) -> str:
    if len(values) < 4:
        return "n/a"
    cuts = statistics.quantiles(values, n=20)
    low, tenth, quarter, median = cuts[0], cuts[1], cuts[4], cuts[9]
    return (
        f"5% {low:.2f}, 10% {tenth:.2f}, 25% {quarter:.2f}, median {median:.2f} (n={len(values)})"
    )
