"""The split rule (topics.splitting): a topic whose failure rate differs sharply inside is cut in two, whatever
the geometry that merged it; a topic of even failures, or a cut leaving a part too small, is kept whole."""

from __future__ import annotations

import numpy as np

from topics.splitting import best_cut, split_mixed


def _blobs(sizes: list[int], spread: float, seed: int = 1) -> np.ndarray:
    """Groups of points around centres that are close (`spread` apart): one topic to a density clustering."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(sizes), 64))
    return np.vstack([c * spread + rng.normal(scale=0.3, size=(n, 64)) for c, n in zip(centres, sizes, strict=True)])


def test_a_small_failing_group_merged_into_a_large_topic_is_cut_out():
    vectors = _blobs([50, 16], spread=0.6)
    labels = np.zeros(66, dtype=np.int64)
    failed = np.zeros(66, dtype=bool)
    failed[[1, 20, 35, 44, 49]] = True  # the large group: 5 of 50
    failed[50:60] = True  # the small one: 10 of 16
    out, splits = split_mixed(vectors, labels, failed, min_part=8)
    assert len(splits) == 1 and splits[0].p_value < 0.001
    assert set(np.unique(out)) == {0, 1}
    small = out[50:]
    assert (small == small[0]).mean() >= 0.9 and (out[:50] != small[0]).mean() >= 0.9


def test_even_failures_keep_the_topic_whole_even_when_it_has_two_groups():
    vectors = _blobs([40, 30], spread=2.0)
    failed = np.arange(70) % 4 == 0  # a quarter of each group
    out, splits = split_mixed(vectors, np.zeros(70, dtype=np.int64), failed, min_part=8)
    assert splits == [] and (out == 0).all()


def test_a_part_smaller_than_a_topic_is_never_cut_out():
    vectors = _blobs([60, 5], spread=2.0)
    failed = np.r_[np.zeros(60, dtype=bool), np.ones(5, dtype=bool)]
    cut = best_cut(vectors, failed, min_part=8)
    # The 5 failing ones alone are too few: a cut, if any, takes at least 8 (and leaves at least 8).
    assert cut is None or min(int(cut[0].sum()), int((~cut[0]).sum())) >= 8
    assert best_cut(vectors, failed, min_part=33) is None  # no two parts of 33 in 65


def test_outliers_stay_outliers_and_other_topics_keep_their_labels():
    vectors = np.vstack([_blobs([50, 16], spread=0.6), _blobs([30], spread=0.0, seed=3) + 5, np.ones((3, 64))])
    labels = np.r_[np.zeros(66), np.full(30, 1), np.full(3, -1)].astype(np.int64)
    failed = np.zeros(99, dtype=bool)
    failed[50:62] = True
    out, splits = split_mixed(vectors, labels, failed, min_part=8)
    assert [s.topic for s in splits] == [0]
    assert (out[66:96] == 1).all() and (out[96:] == -1).all()
    assert set(np.unique(out[:66])) == {0, 2}


def test_the_same_input_gives_the_same_split():
    vectors = _blobs([50, 16], spread=0.6)
    failed = np.r_[np.zeros(50, dtype=bool), np.ones(16, dtype=bool)]
    first = split_mixed(vectors, np.zeros(66, dtype=np.int64), failed, min_part=8)[0]
    assert (first == split_mixed(vectors, np.zeros(66, dtype=np.int64), failed, min_part=8)[0]).all()
