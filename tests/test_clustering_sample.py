"""Sample-and-assign clustering: valid soft clusters, deterministic, off below the default threshold."""
from __future__ import annotations

import numpy as np
import pytest

from sirerag.clustering import ClusterStats, cluster
from sirerag.clustering.sample import ASSIGN_BLOCK, assign_block, fit_sample, sample_and_assign, sample_rows
from sirerag.core.config import ClusteringConfig
from sirerag.core.errors import ConfigError
from tests.test_clustering import assert_valid, planted

#: Forced on: every step over 60 rows is fitted on 60 of them.
FORCED = ClusteringConfig(sample_above=0, sample_size=60, processes=1)


@pytest.fixture(scope="module")
def blobs():
    return planted(seed=5, n_clusters=4, per=40)  # 160 rows: the global step is sampled, the local ones not


@pytest.fixture(scope="module")
def forced(blobs):
    points, _ = blobs
    stats = ClusterStats()
    return cluster(points, [20] * len(points), config=FORCED, random_state=224, stats=stats), stats


def test_forced_gives_valid_soft_clusters_inside_the_planted_blobs(blobs, forced) -> None:
    points, truth = blobs
    clusters, stats = forced
    assert_valid(clusters, len(points))
    assert stats.sampled_steps == 1  # the global step only: every global cluster has at most 60 rows
    assert stats.searches[0][0] == FORCED.sample_size  # the mixture was fitted on the sample alone
    for members in clusters:  # the local steps refine the global clusters, which follow the blobs
        assert len(set(truth[members])) == 1


def test_forced_is_deterministic_for_a_seed(blobs, forced) -> None:
    points, _ = blobs
    again = cluster(points, [20] * len(points), config=FORCED, random_state=224)
    assert [c.tolist() for c in again] == [c.tolist() for c in forced[0]]


def test_global_step_assigns_unsampled_rows_to_their_blob(blobs) -> None:
    points, truth = blobs
    clusters = sample_and_assign(points, global_step=True, config=FORCED, random_state=224, stats=ClusterStats(),
                                 local_neighbors=10)
    assert_valid(clusters, len(points))  # every row, sampled or not, is in a cluster
    for members in clusters:  # and no cluster mixes two blobs (the mixture may split a blob: how many
        assert len(set(truth[members])) == 1  # components BIC picks moves with the CPU's floating point)


def test_assign_block_depends_only_on_its_rows(blobs) -> None:
    points, _ = blobs
    sample = sample_rows(len(points), 60, 224)
    fit = fit_sample(points[sample], n_neighbors=7, dim=10, max_clusters=10, random_state=224, search="fast",
                     stats=ClusterStats())
    rest = np.setdiff1d(np.arange(len(points)), sample)
    first = assign_block(fit, points[rest])
    assert first.shape == (len(rest), fit.mixture.n_components)
    np.testing.assert_allclose(first.sum(axis=1), 1.0, rtol=1e-6)
    assert np.array_equal(assign_block(fit, points[rest]), first)  # the same block again: the same result


def test_sample_rows_is_seeded_sorted_and_distinct() -> None:
    rows = sample_rows(1000, 100, 3)
    assert len(set(rows.tolist())) == 100 and np.all(np.diff(rows) > 0)
    assert np.array_equal(rows, sample_rows(1000, 100, 3)) and not np.array_equal(rows, sample_rows(1000, 100, 4))
    assert np.array_equal(sample_rows(50, 100, 3), np.arange(50))
    assert ASSIGN_BLOCK >= 1024


def test_default_threshold_leaves_small_inputs_unsampled(blobs) -> None:
    points, _ = blobs
    stats = ClusterStats()
    cluster(points, [20] * len(points), config=ClusteringConfig(processes=1), random_state=224, stats=stats)
    assert stats.sampled_steps == 0 and ClusteringConfig().sample_above >= 20_000


def test_sample_size_below_the_minimum_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"clustering\.sample_size must be an integer >= 32"):
        ClusteringConfig(sample_size=10).validate()


class _ShippingEngine:
    """A distributed engine's contract without Ray: the worker factory crosses a process boundary (a pickle
    round trip, as Ray ships it), items and results travel as JSON, and batches finish in reverse order."""

    name = "shipping"
    actors = 2

    def __init__(self) -> None:
        self.batches: list[int] = []

    def map_batches(self, factory, batches, *, label):  # noqa: ANN001, ANN201
        import json
        import pickle

        worker = pickle.loads(pickle.dumps(factory))()
        for index in reversed(range(len(batches))):
            self.batches.append(len(batches[index]))
            items = json.loads(json.dumps(batches[index]))
            yield index, json.loads(json.dumps(worker(items)))

    def close(self) -> None:
        return None


def test_assignment_blocks_on_a_distributed_engine_give_the_clusters_of_this_process(
        blobs, monkeypatch: pytest.MonkeyPatch) -> None:
    from sirerag.clustering import sample
    from sirerag.engine import LocalEngine

    monkeypatch.setattr(sample, "ASSIGN_BLOCK", 30)  # 100 unsampled rows: four blocks, three windows of two
    monkeypatch.setattr(sample, "BLOCKS_PER_WORKER", 1)
    points, _ = blobs
    here = sample_and_assign(points, global_step=True, config=FORCED, random_state=224, stats=ClusterStats(),
                             local_neighbors=10)
    engine = _ShippingEngine()
    with sample.clustering_engine(engine) as used:
        assert used is engine
        shipped = sample_and_assign(points, global_step=True, config=FORCED, random_state=224,
                                    stats=ClusterStats(), local_neighbors=10)
    assert sorted(engine.batches) == [10, 30, 30, 30]
    assert [c.tolist() for c in shipped] == [c.tolist() for c in here]
    with sample.clustering_engine(LocalEngine()) as used:  # an engine running here keeps the blocks here
        assert used is None
        assert [c.tolist() for c in sample_and_assign(points, global_step=True, config=FORCED, random_state=224,
                                                       stats=ClusterStats(), local_neighbors=10)] == \
            [c.tolist() for c in here]
