"""The offline extractor: sentences holding a cue phrase become typed long-term memories.

Consolidation uses it when no chat model is configured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.models import MainMessage, MemoryType

MEMORY_CHARS = 300


@dataclass(frozen=True)
class Extracted:
    memory_type: str
    content: str


# Sentences of the user's messages holding one of these cues become memories of that type
# (first match wins). One table, Chinese and English.
CUES: tuple[tuple[str, str], ...] = (
    (
        MemoryType.PREFERENCE,
        r"我(很|最|比较|更|也)?(喜欢|偏好|习惯|讨厌)|我不(太)?喜欢|请(用|以|不要|别|尽量)|以后(都)?请"
        r"|\bi (really |also |much )?(like|love|prefer|hate|dislike)\b|\bi don'?t like\b"
        r"|\bplease (always|never|use|answer|reply|write|keep)\b|\bi'?d rather\b",
    ),
    (
        MemoryType.DECISION,
        r"我们决定|决定(用|采用|使用|把|了)|就这么定|定下来"
        r"|\bwe('ve| have)? decided\b|\bwe will (use|go)\b|\blet'?s go with\b",
    ),
    (
        MemoryType.PROJECT,
        r"项目|\bthe project\b|\bour (app|product|service|repo|codebase)\b"
        r"|\bwe('re| are) building\b",
    ),
    (
        MemoryType.FACT,
        r"我叫|我是|我住在|我在.{0,10}(工作|上班|读书)|我的.{0,8}(是|叫)"
        r"|\bmy name is\b|\bi live in\b|\bi work (at|for|as)\b|\bi'?m an? \b|\bi am an? \b",
    ),
)
_CUES = [(kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in CUES]
_SENTENCE_END = re.compile(r"(?<=[。！？!?.;；\n])\s*")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def offline_extract(messages: list[MainMessage]) -> list[Extracted]:
    found: dict[str, Extracted] = {}
    for message in messages:
        for sentence in sentences(message.content):
            for kind, cue in _CUES:
                if cue.search(sentence):
                    key = re.sub(r"[\W_]+", "", sentence.lower())
                    found.setdefault(key, Extracted(kind, sentence[:MEMORY_CHARS]))
                    break
    return list(found.values())
