"""How orca calls a remote model (embeddings, chat): one httpx client, one retry policy."""

from __future__ import annotations

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter


def http_client(
    *,
    base_url: str,
    api_key: str | None,
    timeout_seconds: float,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    """A client for an OpenAI-compatible API; the key only ever travels in the header."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(
        base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_seconds, transport=transport
    )


def retrying(*, attempts: int, backoff_seconds: float, retryable: type[Exception]) -> Retrying:
    """Retry `retryable` failures with jittered exponential backoff, then raise the last one."""
    return Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_exponential_jitter(
            multiplier=backoff_seconds, max=30 * backoff_seconds, jitter=backoff_seconds
        ),
        retry=retry_if_exception_type(retryable),
        reraise=True,
    )
