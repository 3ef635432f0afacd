"""The chat model behind summaries and extraction: any OpenAI-compatible server.

`[llm]` configures it (orca_memory.core.config: a provider preset such as ollama or siliconflow, or
a base_url and model of your own). Without one, or when it fails, the offline summarizer
(memory.summaries) and the rule-based extractor (memory.extraction) take over, so the three
memory layers fill on the default setup too.

Each process counts its calls (`USAGE`): health reports the web process's counts and the
task workers' (which write theirs into their heartbeat files, memory.heartbeat).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass, fields, replace
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from memory.remote import http_client, retry_after_seconds, retrying

logger = logging.getLogger(__name__)


class LLMError(Exception):
    """The chat model failed or answered nothing usable."""


class _Retryable(LLMError):
    """Worth another attempt: timeouts, connection errors, 429 and 5xx."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # the server's Retry-After, which `retrying` honours


@dataclass(frozen=True)
class Counts:
    """A process's use of the chat model since it started."""

    calls: int = 0  # requests sent, retries included
    failures: int = 0  # requests that brought no answer (timeout, refused, 4xx/5xx, malformed)
    invalid_answers: int = 0  # answers the caller could not use (not the JSON it asked for)
    fallbacks: int = 0  # summaries and extractions the offline path made as the model failed
    prompt_tokens: int = 0  # from the answers' `usage`, when the server sends it
    completion_tokens: int = 0
    answered: int = 0
    latency_ms_total: float = 0.0  # of the answered requests
    last_latency_ms: float | None = None

    def report(self) -> dict[str, object]:
        """What health shows: the counts, and the mean and last latency of an answer."""
        shown = asdict(self)
        del shown["answered"], shown["latency_ms_total"]
        mean = self.latency_ms_total / self.answered if self.answered else None
        return shown | {"mean_latency_ms": None if mean is None else round(mean, 1)}

    @classmethod
    def read(cls, raw: Any) -> Counts | None:
        """Counts another process wrote (its heartbeat file), or None if they are not."""
        if not isinstance(raw, dict) or set(raw) != {f.name for f in fields(cls)}:
            return None
        numbers = [value for name, value in raw.items() if name != "last_latency_ms"]
        if not all(isinstance(value, int | float) for value in numbers):
            return None
        return cls(**raw)

    @classmethod
    def total(cls, counts: list[Counts]) -> Counts:
        """Several processes' counts as one; the last latency is the first's (health passes
        the newest heartbeat first)."""
        summed = {
            f.name: sum(getattr(c, f.name) for c in counts)
            for f in fields(cls)
            if f.name != "last_latency_ms"
        }
        return cls(**summed, last_latency_ms=counts[0].last_latency_ms if counts else None)


class Usage:
    """This process's counts, safe across threads (gunicorn's, the worker's heartbeat).

    Every request ends as `failed` or `answered`."""

    def __init__(self) -> None:
        self._counts = Counts()
        self._lock = threading.Lock()

    def counts(self) -> Counts:
        with self._lock:
            return self._counts

    def failed(self) -> None:
        self._add(calls=1, failures=1)

    def answered(self, latency_ms: float, tokens: dict[str, int]) -> None:
        self._add(
            calls=1,
            answered=1,
            latency_ms_total=latency_ms,
            **tokens,
            last_latency_ms=latency_ms,
        )

    def invalid_answer(self) -> None:
        self._add(invalid_answers=1)

    def fell_back(self) -> None:
        self._add(fallbacks=1)

    def _add(self, *, last_latency_ms: float | None = None, **deltas: float) -> None:
        with self._lock:
            now = self._counts
            added = {name: getattr(now, name) + delta for name, delta in deltas.items()}
            if last_latency_ms is not None:
                added["last_latency_ms"] = last_latency_ms
            self._counts = replace(now, **added)


USAGE = Usage()


def host_of(base_url: str) -> str:
    """A base URL's host and port: what health may show (never a path, query or credentials)."""
    parts = urlsplit(base_url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def _refuses_response_format(response: httpx.Response) -> bool:
    """Some servers (llama.cpp, vLLM versions) answer 400 or 422 naming the parameter."""
    return response.status_code in (400, 422) and "response_format" in response.text


class ChatClient:
    """OpenAI-compatible `POST {base_url}/chat/completions`, with timeouts and backoff."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        provider: str = "custom",
        attempts: int = 3,
        backoff_seconds: float = 1.0,
        timeout_seconds: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        usage: Usage = USAGE,
    ) -> None:
        self.provider = provider
        self.model = model
        self.host = host_of(base_url)
        self.usage = usage
        # Cleared, for this process, when the server refuses `response_format`.
        self.json_mode = True
        self._retrying = retrying(
            attempts=attempts, backoff_seconds=backoff_seconds, retryable=_Retryable
        )
        self._client = http_client(
            base_url=base_url, api_key=api_key, timeout_seconds=timeout_seconds, transport=transport
        )

    def complete(self, prompt: str, *, max_tokens: int = 512, json_object: bool = False) -> str:
        """The model's answer to one user prompt (temperature 0: answers should be stable).

        `json_object` asks the server for a JSON object (`response_format`) when it supports
        that; the caller checks the answer either way."""
        return self._retrying(self._complete, prompt, max_tokens, json_object)

    def _complete(self, prompt: str, max_tokens: int, json_object: bool) -> str:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        if json_object and self.json_mode:
            body["response_format"] = {"type": "json_object"}
        response, latency_ms = self._post(body)
        if "response_format" in body and _refuses_response_format(response):
            self.usage.failed()
            logger.warning(
                "The chat model at %s refuses response_format: asking for JSON by the prompt "
                "alone from now on",
                self.host,
            )
            self.json_mode = False
            del body["response_format"]
            response, latency_ms = self._post(body)
        try:
            content, tokens = self._answer(response)
        except LLMError:
            self.usage.failed()
            raise
        self.usage.answered(latency_ms, tokens)
        return content

    def _post(self, body: dict[str, Any]) -> tuple[httpx.Response, float]:
        """The server's response and how long it took, in milliseconds."""
        started = time.monotonic()
        try:
            response = self._client.post("/chat/completions", json=body)
        except httpx.TransportError as exc:  # timeouts included
            self.usage.failed()
            raise _Retryable(f"chat model unreachable: {type(exc).__name__}: {exc}") from exc
        return response, round((time.monotonic() - started) * 1000, 1)

    def _answer(self, response: httpx.Response) -> tuple[str, dict[str, int]]:
        """The answer's text and its token counts (when the server sends `usage`)."""
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(
                f"chat model answered {status}", retry_after=retry_after_seconds(response)
            )
        if status in (401, 403):
            raise LLMError(f"chat model answered {status}: the API key was refused")
        if status != 200:
            raise LLMError(f"chat model answered {status}: {response.text[:200]}")
        try:
            answer = response.json()
            content = answer["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"malformed chat response ({type(exc).__name__}: {exc})") from exc
        if not isinstance(content, str) or not content.strip():
            raise LLMError("the chat model answered nothing")
        return content.strip(), _tokens(answer)


def _tokens(answer: dict[str, Any]) -> dict[str, int]:
    usage = answer.get("usage")
    if not isinstance(usage, dict):
        return {}
    return {
        name: usage[name]
        for name in ("prompt_tokens", "completion_tokens")
        if isinstance(usage.get(name), int) and not isinstance(usage.get(name), bool)
    }


@cache
def configured_chat() -> ChatClient | None:
    """The chat model `[llm]` configures, or None (offline)."""
    config = settings.ORCA
    if config.llm_provider == "none":
        return None
    return ChatClient(
        provider=config.llm_provider,
        base_url=config.llm_base_url,
        api_key=config.llm_api_key,
        model=config.llm_model,
        timeout_seconds=config.llm_timeout_seconds,
    )


@receiver(setting_changed)
def _forget_the_chat_model(*, setting: str, **kwargs: Any) -> None:
    """Tests replace settings.ORCA; a server never does (a restart applies a new configuration)."""
    if setting == "ORCA":
        configured_chat.cache_clear()
