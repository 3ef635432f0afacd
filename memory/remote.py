"""How orca calls a remote model (embeddings, chat): one httpx client, one retry policy."""

from __future__ import annotations

from email.utils import parsedate_to_datetime
from time import time

import httpx
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

# A server asking for a longer pause (Retry-After) is waited for this long at most: the task
# worker has other work, and the caller's offline path is better than an hour's wait.
RETRY_AFTER_CAP_SECONDS = 60.0


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


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The pause a 429 or 503 asks for (`Retry-After`: seconds or an HTTP date), if any."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_SECONDS)


def retrying(*, attempts: int, backoff_seconds: float, retryable: type[Exception]) -> Retrying:
    """Retry `retryable` failures with jittered exponential backoff, then raise the last one.

    A failure carrying `retry_after` (seconds, from the server's Retry-After) waits that long
    instead."""
    backoff = wait_exponential_jitter(
        multiplier=backoff_seconds, max=30 * backoff_seconds, jitter=backoff_seconds
    )

    def wait(state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        asked = getattr(failure, "retry_after", None)
        return asked if asked is not None else backoff(state)

    return Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait,
        retry=retry_if_exception_type(retryable),
        reraise=True,
    )
