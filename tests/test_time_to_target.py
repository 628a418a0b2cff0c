"""The projection of time to target: the epochs read off the scaling benchmark's curves,
the growth of the columns extrapolated past the rows measured, and the sums it makes."""

import numpy as np
import pytest

from sparcml_apps.bench import _time_to_target as time_to_target
from sparcml_apps.training import exchange

pytestmark = pytest.mark.usefixtures("compiled_kernels")


def costs_of(nprocs, constants, n_weights=1_000_000):
    """The cost model of a binary model of ``n_weights`` weights on ``nprocs`` ranks."""
    return exchange.Costs(
        size=n_weights + 1, n_out=1, n_weights=n_weights, nprocs=nprocs, itemsize=4,
        index_itemsize=4, constants=constants,
    )  # fmt: skip


def summary(nprocs, accuracy, target, dataset="url-like", network="shm"):
    return {
        "system": "sparcml", "dataset": dataset, "network": network, "nprocs": nprocs,
        "target": target, "curve": {"epoch": list(range(1, len(accuracy) + 1)),
                                    "accuracy": accuracy},
    }  # fmt: skip


def test_epochs_to_target_interpolate_the_mean_curve():
    scaling = {
        "summary": [
            summary(1, [0.80, 0.86, 0.88], 0.85),  # 0.85 is 5/6 of the way from 1 to 2
            summary(2, [0.84, 0.85, 0.88], 0.85),  # reached at epoch 2 exactly
            summary(4, [0.86, 0.87, 0.88], 0.85),  # in the first epoch: 0.85/0.86 of it
            summary(8, [0.80, 0.81, 0.82], 0.85),  # never: not counted
            summary(2, [0.90, 0.91, 0.92], 0.85, network="1gbit"),  # another network
            summary(2, [0.90, 0.91, 0.92], 0.85, dataset="a9a"),  # other data
        ]
    }
    found = time_to_target.epochs_to_target(scaling)
    assert found == pytest.approx({1: 1 + 5 / 6, 2: 2.0, 4: 0.85 / 0.86})


def test_columns_extrapolated_from_fewer_rows_are_near_those_measured():
    _, n_features, nnz_per_row = time_to_target.SHAPES["url"]
    X, _, lengths, columns = time_to_target.growth(n_features, nnz_per_row, nonzeros=3_000_000)
    assert columns[-1] == np.unique(X.indices).size  # every row of a random order
    # from the rows up to a quarter of them, the last two doublings: within 10%
    predicted = exchange.columns_of(lengths[:-2], columns[:-2], lengths[-1], n_features)
    assert predicted == pytest.approx(columns[-1], rel=0.1)
    assert exchange.columns_of(lengths, columns, 10**12, n_features) == n_features


def test_an_epoch_is_its_steps_and_its_exchanges():
    lengths = np.array([1 << i for i in range(11)])
    columns = np.minimum(lengths * 50, 30_000).astype(float)
    measured = lengths, columns, 2e-8
    constants = {"alpha": 1e-5, "beta": 1e-9, "gamma": 3e-9}
    shape = (64_000, 1_000_000, 100)
    records = time_to_target.project(
        shape, measured, constants, [1, 2, 4, 8], epochs={1: 2.0, 2: 2.5}
    )
    one, *more = records
    assert (one["local_steps"], one["exchanges_per_epoch"], one["mb_sent_per_epoch"]) == (0, 0, 0)
    assert one["exchange_seconds"] == 0 and one["speedup"] == 1
    assert one["compute_seconds"] == pytest.approx(64_000 * 100 * 2e-8)
    for r in records:
        assert r["compute_seconds"] == pytest.approx(one["compute_seconds"] / r["nprocs"])
        assert r["time_to_target"] == pytest.approx(
            r["epochs_to_target"] * (r["compute_seconds"] + r["exchange_seconds"])
        )
        assert r["speedup"] == pytest.approx(one["time_to_target"] / r["time_to_target"])
    # the epochs measured, and beyond them those of the most ranks measured
    assert [r["epochs_to_target"] for r in records] == [2.0, 2.5, 2.5, 2.5]
    # the period is the shortest power of two (evened out over the epoch) whose exchange
    # the cost model expects to take at most a tenth of its steps' time, or that gives an
    # epoch an exchange for every pair of ranks, if shorter
    for r in more:
        costs = costs_of(r["nprocs"], constants)
        steps, period = r["rows_per_rank"], r["local_steps"]
        least = exchange.least_exchanges(r["nprocs"])

        def fits(period, costs=costs, steps=steps, least=least):
            grown = exchange.columns_of(lengths, columns, period, 1_000_000)
            cost = costs.exchange(grown, period * 100)
            cheap = cost <= exchange.EXCHANGE_SHARE * costs.steps(period * 100)
            return cheap or -(-steps // min(2 * period, steps)) < least

        power = 1 << (period - 1).bit_length()
        assert (fits(power) or period == steps) and not fits(power // 2)
        assert power // 2 < period <= power
        assert r["exchanges_per_epoch"] == -(-steps // period)
        assert r["exchange_seconds"] > 0 and r["mb_sent_per_epoch"] > 0


@pytest.mark.parametrize("nprocs", [2, 4, 8, 16])
def test_an_epoch_takes_the_least_exchanges_however_dear(nprocs):
    # exchanges a thousand times dearer than their steps: no period is cheap, yet an
    # epoch of 10,000 steps still exchanges once for every pair of ranks
    lengths = np.array([1 << i for i in range(15)])
    columns = np.minimum(lengths * 50, 30_000)
    nonzeros = lengths * 100
    costs = costs_of(nprocs, {"alpha": 1.0, "beta": 1e-3, "gamma": 1e-3})
    assert costs.exchange(30_000, 100) > 1000 * costs.steps(10_000 * 100)
    steps, least = 10_000, nprocs * (nprocs - 1) // 2
    period = exchange.auto_period(costs, columns, nonzeros, steps)
    exchanges = -(-steps // period)
    assert exchanges >= least
    assert exchanges <= 2 * least  # the longest power of two that gives enough
    # where the exchange of 256 steps is cheap (1,000 weights, an allreduce for free), the
    # cost model's period (evened out: 250 steps) wins wherever the floor's is longer
    cheap = costs_of(nprocs, {"alpha": 0.0, "beta": 0.0, "gamma": 0.0}, n_weights=1_000)
    found = exchange.auto_period(cheap, np.minimum(columns, 1_000), nonzeros, steps)
    assert found == min(period, 250)


@pytest.mark.parametrize(
    "schedule, power_t, ratio",
    [  # the rate at the end of the first epoch over the rate at the start of the k-th
        ("optimal", 0.0, lambda k: (500 + (k - 1) * 2_000) / (500 + 2_000)),  # t0 = 500
        ("invscaling", 0.5, lambda k: (k - 1) ** 0.5),
        ("constant", 0.0, lambda k: 1.0),
        ("adaptive", 0.0, lambda k: 1.0),
        ("invscaling", -0.5, lambda k: 1.0),  # a rate that grows: as the first epoch
    ],
)
def test_later_epochs_exchange_less_often_as_the_rate_falls(schedule, power_t, ratio):
    from sparcml_apps.training import kernels

    params = np.zeros(kernels.N_PARAMS)
    params[kernels.SCHEDULE] = kernels.SCHEDULES[schedule]
    params[[kernels.ETA0, kernels.POWER_T, kernels.ALPHA, kernels.T0]] = 0.1, power_t, 1e-4, 500
    steps, first = 2_000, 32
    periods = [exchange.epoch_period(first, steps, k, params) for k in range(1, 9)]
    assert periods[:2] == [first, first]  # the first epoch as planned, the second alike
    for k, period in enumerate(periods, 1):
        longer = max(first, int(first * ratio(k)))
        exchanges = -(-steps // longer)  # as few as the rate allows, evened out
        assert period == -(-steps // exchanges) and -(-steps // period) == exchanges
    assert periods == sorted(periods) and (periods[-1] > first) == (ratio(8) >= 2)
    # no period past the epoch, nor any change where the first takes the whole epoch
    assert exchange.epoch_period(first, 40, 50, params) <= 40
    assert exchange.epoch_period(steps, steps, 8, params) == steps
