"""Each bundled model's thresholds, checked against pairs a person would judge.

A model scores unrelated texts at its own level (MiniLM and USE differ), so each carries its
own `Thresholds` (memory.embeddings). These pairs are how the values were chosen; a model or a
threshold change that breaks one of them changes what consolidation merges or what an identity
question recalls.
"""

from __future__ import annotations

import numpy as np
import pytest

from memory import embeddings
from memory.embeddings import LocalEmbedder

# Say the same thing: consolidation merges them.
SAME = [
    ("I'm allergic to peanuts.", "I have a peanut allergy."),
    ("I prefer tabs over spaces.", "I like tabs more than spaces."),
    ("My name is Dana and I'm a backend engineer.", "I'm Dana, a backend engineer."),
    (
        "We decided to use PostgreSQL for the order system.",
        "We chose PostgreSQL for the order system.",
    ),
    ("I usually run 5 km every morning.", "Every morning I usually go for a 5 km run."),
    ("我对花生过敏。", "我花生过敏。"),
    ("我喜欢喝乌龙茶。", "我爱喝乌龙茶。"),
    ("我叫小王，是后端工程师。", "我是小王，做后端开发的工程师。"),
    ("部署日期定在下周五晚上十点。", "部署时间定在下周五晚上10点。"),
]
# The same subject with another value, or nothing in common: both must stay.
DIFFERENT = [
    ("I live in Paris.", "I live in Berlin."),
    ("My favourite editor is Helix.", "My favourite editor is Neovim."),
    ("We decided to use PostgreSQL.", "We decided to use MongoDB."),
    ("I'm allergic to peanuts.", "I'm allergic to shellfish."),
    ("我住在滨江区。", "我住在余杭区。"),
    ("我们决定用 PostgreSQL。", "我们决定用 MongoDB。"),
    ("I'm allergic to peanuts.", "My favourite editor is Helix."),
    ("我对花生过敏。", "我们决定用 PostgreSQL。"),
    ("I live in Paris.", "我喜欢喝乌龙茶。"),
]
IDENTITY_QUESTIONS = [
    "你还记得我吗？",
    "What are my preferences?",
    "Do you remember me?",
    "我叫什么名字？",
]
# Memories an identity question must not take for being about the person.
NOT_ABOUT_THE_PERSON = [
    "We decided to use PostgreSQL for the order system.",
    "部署日期定在下周五晚上十点。",
    "The meeting moved to Tuesday.",
]
MEASURED = [
    "minilm-use-multilingual",
    "all-MiniLM-L6-v2",
    "universal-sentence-encoder-multilingual",
]


@pytest.fixture(scope="module", params=MEASURED)
def model(request) -> LocalEmbedder:
    return LocalEmbedder(embeddings.local_model(request.param))


def readable(model: LocalEmbedder, texts: list[str]) -> list[str]:
    """What the model's vectors are used for: an English-only model never sees Chinese."""
    return [text for text in texts if embeddings.covers(model.signature, text)]


def similarities(model: LocalEmbedder, pairs: list[tuple[str, str]]) -> list[float]:
    left = np.array(model.embed([a for a, _ in pairs]))
    right = np.array(model.embed([b for _, b in pairs]))
    return [float(x) for x in np.einsum("ij,ij->i", left, right)]


def test_texts_that_say_the_same_are_duplicates_and_others_are_not():
    # The default model only: MiniLM scores "allergic to peanuts / to shellfish" 0.87 and a
    # paraphrase 0.84, USE 0.80 and 0.80; neither threshold can separate them
    # (docs/EVALUATION.md, models).
    model = LocalEmbedder(embeddings.local_model(None))
    duplicate = model.thresholds.duplicate

    assert min(similarities(model, SAME)) > duplicate
    assert max(similarities(model, DIFFERENT)) < duplicate


def test_an_identity_question_does_not_take_memories_about_other_things(model):
    questions = np.array(model.embed(readable(model, IDENTITY_QUESTIONS), query=True))
    others = np.array(model.embed(readable(model, NOT_ABOUT_THE_PERSON)))

    assert float((questions @ others.T).max()) < model.thresholds.identity


def test_a_floor_is_lower_for_a_query_and_a_text_in_different_scripts():
    thresholds = embeddings.local_model(None).thresholds

    base = thresholds.relevance
    assert thresholds.floor(base, "我对什么过敏？", "我对花生过敏") == base
    assert thresholds.floor(base, "What am I allergic to?", "I'm allergic to peanuts") == base
    lower = base * thresholds.cross_script
    assert thresholds.floor(base, "What am I allergic to?", "我对花生过敏") == lower < base
    assert thresholds.floor(base, "我对什么过敏？", "I'm allergic to peanuts") == lower
