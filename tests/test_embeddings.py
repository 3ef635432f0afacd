"""Embedding providers: the real HTTP client against httpx.MockTransport, and the local model."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time

import httpx
import numpy as np
import pytest

from memory import embeddings, vectors
from memory.context import context_build
from memory.embeddings import EmbeddingError, HttpEmbedder, InputRejected, LocalEmbedder
from orca_memory.core.config import load_config

KEY = "sk-test-secret-key"


def answer(vectors, *, shuffle: bool = False) -> dict:
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    return {"object": "list", "data": list(reversed(data)) if shuffle else data}


def client(handler, *, dimension: int = 3, batch_size: int = 32, attempts: int = 3) -> HttpEmbedder:
    return HttpEmbedder(
        provider="siliconflow",
        base_url="https://api.example.test/v1/",
        api_key=KEY,
        model="Pro/BAAI/bge-m3",
        dimension=dimension,
        batch_size=batch_size,
        attempts=attempts,
        backoff_seconds=0,
        transport=httpx.MockTransport(handler),
    )


def test_it_posts_openai_style_batches_and_keeps_the_order():
    requests = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        texts = json.loads(request.content)["input"]
        return httpx.Response(200, json=answer([[len(t), 0.0, 1.0] for t in texts], shuffle=True))

    vectors = client(handler, batch_size=2).embed(["a", "bb", "ccc", "dddd", "eeeee"])

    assert [v[0] for v in vectors] == [1, 2, 3, 4, 5]
    assert len(requests) == 3
    first = requests[0]
    assert str(first.url) == "https://api.example.test/v1/embeddings"
    assert first.headers["Authorization"] == f"Bearer {KEY}"
    assert json.loads(first.content) == {
        "model": "Pro/BAAI/bge-m3",
        "input": ["a", "bb"],
        "encoding_format": "float",
    }


@pytest.mark.parametrize("failure", [429, 500, 503, "timeout", "connect"])
def test_it_retries_transient_failures(failure):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            if failure == "timeout":
                raise httpx.ReadTimeout("slow", request=request)
            if failure == "connect":
                raise httpx.ConnectError("refused", request=request)
            return httpx.Response(failure, json={"error": "busy"})
        return httpx.Response(200, json=answer([[1.0, 0.0, 0.0]]))

    assert client(handler).embed(["x"]) == [[1.0, 0.0, 0.0]]
    assert len(calls) == 2


def test_it_gives_up_after_its_attempts():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(502)

    with pytest.raises(EmbeddingError, match="answered 502"):
        client(handler, attempts=3).embed(["x"])
    assert len(calls) == 3


@pytest.mark.parametrize(
    "body",
    [
        "not json at all",
        json.dumps({"data": "nope"}),
        json.dumps(answer([[1.0, 0.0]])),  # wrong dimension
        json.dumps(answer([[1.0, 0.0, 0.0]])),  # one vector for two texts
        json.dumps(answer([[1.0, 0.0, 0.0], [1.0, "x", 0.0]])),  # not a number
        '{"data": [{"index": 0, "embedding": [NaN, 0, 0]}, {"index": 1, "embedding": [0, 0, 1]}]}',
        json.dumps(
            {"data": [{"index": 0, "embedding": [1, 0, 0]}, {"index": 0, "embedding": [1, 0, 0]}]}
        ),
    ],
)
def test_a_bad_response_is_an_error_never_a_vector(body):
    def handler(request):
        return httpx.Response(200, text=body, headers={"Content-Type": "application/json"})

    with pytest.raises(EmbeddingError) as error:
        client(handler, attempts=1).embed(["one", "two"])
    assert not isinstance(error.value, InputRejected)


def test_a_refused_input_is_told_apart_and_the_key_never_shows():
    def handler(request):
        status = 400 if b"too long" in request.content else 401
        return httpx.Response(status, json={"message": "nope"})

    with pytest.raises(InputRejected) as rejected:
        client(handler).embed(["too long"])
    with pytest.raises(EmbeddingError, match="refused the API key") as refused:
        client(handler).embed(["fine"])
    assert KEY not in str(rejected.value) + str(refused.value)
    assert not isinstance(refused.value, InputRejected)


def test_auto_picks_a_configured_remote_provider_else_local(settings, tmp_path):
    def provider(**env: str) -> tuple[str, embeddings.Signature | None]:
        settings.ORCA = load_config({"ORCA_HOME": str(tmp_path), **env})
        chosen = embeddings._embedder_for(embeddings.provider_name())
        return embeddings.provider_name(), chosen.signature if chosen else None

    try:
        # The old way: a SiliconFlow key alone.
        assert provider(SILICONFLOW_API_KEY="sk-1") == (
            "siliconflow",
            embeddings.Signature("siliconflow", "Pro/BAAI/bge-m3", 1024),
        )
        assert provider()[0] == "local"  # always installed
        assert provider(
            EMBEDDING_BASE_URL="http://127.0.0.1:11434/v1",
            EMBEDDING_MODEL="nomic-embed-text",
            EMBEDDING_DIMENSION="768",
        ) == ("openai", embeddings.Signature("openai", "nomic-embed-text", 768))
        assert provider(EMBEDDING_PROVIDER="none") == ("none", None)
    finally:
        embeddings._embedder_for.cache_clear()


@pytest.mark.parametrize("name", ["minilm-use-multilingual", "all-MiniLM-L6-v2"])
def test_a_bundled_model_embeds_offline_and_similar_texts_are_close(name):
    model = LocalEmbedder(embeddings.local_model(name))

    cat, kitten, stocks = model.embed(
        [
            "The cat sleeps on the mat.",
            "A kitten is napping on the rug.",
            "Stock prices fell sharply.",
        ]
    )

    assert len(cat) == model.signature.dimension
    assert math.isclose(math.sqrt(sum(x * x for x in cat)), 1.0, rel_tol=1e-4)

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(cat, kitten) > cosine(cat, stocks) + 0.2


def warming_up(monkeypatch, load_model) -> LocalEmbedder:
    """A LocalEmbedder whose warm-up has started, `load_model` standing in for the model's
    loader, on tables prepared as the worker's first run does."""
    vectors.query_vector.cache_clear()
    model = LocalEmbedder(dataclasses.replace(embeddings.local_model(None), encoder=load_model))
    vectors.prepare_index(model.signature)
    model.warm_up()
    return model


def context_degradations(model: LocalEmbedder) -> list[str]:
    return context_build(
        agent_id="a1", session_id="s1", query="where do I live?", model_window=8192, embedder=model
    ).degraded


def wait_for_the_warm_up(model: LocalEmbedder) -> None:
    deadline = time.monotonic() + 10
    while model.still_loading() and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.django_db
def test_while_a_server_warms_the_local_model_up_queries_degrade_instead_of_waiting(monkeypatch):
    release = threading.Event()

    class LoadedModel:
        def encode(self, texts, *, query):
            return np.full((len(texts), 896), 896**-0.5, dtype=np.float32)

    def load_model():
        assert release.wait(10), "the test never let the model load"
        return LoadedModel()

    model = warming_up(monkeypatch, load_model)

    assert context_degradations(model) == [
        "vector search is unavailable: local/minilm-use-multilingual (896 dims): "
        "the model is still loading"
    ]
    release.set()
    wait_for_the_warm_up(model)
    assert context_degradations(model) == []


@pytest.mark.django_db
def test_a_failed_warm_up_is_reported_by_the_next_query_not_hidden_as_loading(monkeypatch):
    def load_model():
        raise RuntimeError("the weights are missing")

    model = warming_up(monkeypatch, load_model)
    wait_for_the_warm_up(model)

    degraded = context_degradations(model)
    assert len(degraded) == 1 and "the weights are missing" in degraded[0]


def test_the_default_model_reads_english_with_both_models_and_chinese_with_use_alone():
    model = LocalEmbedder(embeddings.local_model(None))
    english, chinese = np.array(model.embed(["We chose PostgreSQL.", "我们决定用 PostgreSQL。"]))

    english_half = slice(0, 384)  # MiniLM's; USE's follows
    assert np.linalg.norm(english) == pytest.approx(1, abs=1e-5)
    assert np.linalg.norm(chinese) == pytest.approx(1, abs=1e-5)
    assert np.linalg.norm(english[english_half]) == pytest.approx(2**-0.5, abs=1e-5)
    assert not chinese[english_half].any()  # MiniLM's vectors of Chinese are noise


def test_the_default_model_matches_a_question_in_one_language_to_an_answer_in_the_other():
    model = LocalEmbedder(embeddings.local_model(None))
    question = np.array(
        model.embed(["What did we decide about the order system database?"], query=True)[0]
    )
    decision, unrelated = np.array(
        model.embed(["我们决定订单系统的数据库用 PostgreSQL。", "我最喜欢的编辑器是 Helix。"])
    )

    assert question @ decision > question @ unrelated + 0.1
