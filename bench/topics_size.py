"""How grouping holds up in small weeks: ARI by corpus size.

    python -m bench.topics_size                     # sizes 30,60,120,250,500, 5 samples each
    python -m bench.topics_size --sizes 30,60 --samples 10

For each size, seeded random subsamples of the labelled corpus (tests/data/topics_labelled.jsonl: 508 questions,
13 topics, several styles) are grouped as relmon groups a week (`topics.build.build_topics`, the default minimum
topic size, no minimum number of questions) with the local TF-IDF + SVD embedding and the fake endpoint's (hashed
bag of words). Prints, per size and embedding, the mean (and worst) adjusted Rand index over the questions put in
a topic, the mean share left out, and how often the failing topic ranks first. The smallest size whose mean ARI is
at least 0.7 with at most 30% left out is where grouping is reliable: `RELMON_TOPICS_MIN_QUESTIONS` (docs/topics.md).
"""

from __future__ import annotations

import argparse
import random
from statistics import mean

FLOOR_ARI, FLOOR_LEFT_OUT = 0.70, 0.30


def _vectors(name: str, texts: list[str]):
    import numpy as np

    from tests.fakes.openai_embeddings import MODELS, vector
    from topics.local_embeddings import local_vectors

    if name == "local":
        return local_vectors(texts)
    return np.vstack([vector(text, MODELS["text-embedding-3-small"]) for text in texts])


def measure(sizes: list[int], samples: int) -> list[tuple[int, str, float, float, float, float]]:
    """(size, embedding, mean ARI, worst ARI, mean share left out, share of samples with the failing topic first
    among those that hold it)."""
    from tests.topics_corpus import LABELLED_FAILING, labelled, quality

    rows = labelled()
    out = []
    for size in sizes:
        for name in ("local", "endpoint"):
            aris, left_out, first = [], [], []
            for seed in range(samples):
                chosen = sorted(random.Random(seed * 1000 + size).sample(range(len(rows)), min(size, len(rows))))
                sample = [rows[i] for i in chosen]
                found = quality(_vectors(name, [r["question"] for r in sample]), name, sample, min_questions=2)
                aris.append(found.ari)
                left_out.append(found.outliers)
                if any(r["topic"] == LABELLED_FAILING and r["failed"] for r in sample):
                    first.append(found.first_topic == LABELLED_FAILING)
            out.append((size, name, mean(aris), min(aris), mean(left_out), mean(first) if first else 0.0))
    return out


def reliable_from(results: list[tuple[int, str, float, float, float, float]]) -> int | None:
    """The smallest size from which every larger size, for every embedding, meets the floors on average."""
    sizes = sorted({r[0] for r in results})
    good = {s: all(r[2] >= FLOOR_ARI and r[4] <= FLOOR_LEFT_OUT for r in results if r[0] == s) for s in sizes}
    for i, size in enumerate(sizes):
        if all(good[s] for s in sizes[i:]):
            return size
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="30,60,120,250,500")
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    results = measure([int(s) for s in args.sizes.split(",")], args.samples)
    print(f"{'questions':>9}  {'embedding':<10}{'ARI':>7}{'worst':>7}{'left out':>10}  failing topic first")
    for size, name, ari, worst, left_out, first in results:
        print(f"{size:>9}  {name:<10}{ari:>7.3f}{worst:>7.3f}{left_out:>9.1%}  {first:.0%}")
    reliable = reliable_from(results)
    where = f"{reliable} questions" if reliable else "none of the sizes measured"
    print(f"reliable (mean ARI >= 0.7, left out <= 30%, every embedding) from: {where}")


if __name__ == "__main__":
    main()
