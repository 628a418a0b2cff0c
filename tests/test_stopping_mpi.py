"""The stopping rule does not depend on the number of ranks: fits of the same rows with
every default on 1, 2 and 4 ranks stop within an epoch of each other, as accurate.

Each fit on P ranks holds its rows out and stops on their score, which every P computes
for the same held-out rows and the model the fit returns. (On the loss of the steps, the
old rule, two ranks ran 42 epochs where one ran 25 on 400,000 url-like rows: each rank's steps
see its own rows only, so that loss falls more slowly on more ranks.)
"""

import json

import numpy as np
import pytest
from mpirun import run_mpi
from testdata import LIBSVM, needs_a9a

pytestmark = pytest.mark.usefixtures("compiled_kernels")
LOSSES = ("hinge", "log_loss")


def fits(nprocs, losses, *sets):
    """{(data, loss): [(epochs, accuracy) a seed]} of the fits on ``nprocs`` ranks, and
    {(data, loss): [(steps an epoch, each epoch's local steps) a seed]}."""
    done = run_mpi("fit_stops.py", nprocs, ",".join(losses), *sets, timeout=600)
    out, periods = {}, {}
    for line in done.stdout[0].splitlines():
        record = json.loads(line)
        key = record["data"], record["loss"]
        out.setdefault(key, []).append((record["epochs"], record["accuracy"]))
        periods.setdefault(key, []).append((record["steps"], record["periods"]))
    return out, periods


@pytest.fixture(scope="module")
def a9a_fits():
    files = f"{LIBSVM / 'a9a'},{LIBSVM / 'a9a.t'}"
    return {nprocs: fits(nprocs, LOSSES, files) for nprocs in (1, 2, 4)}


@pytest.fixture(scope="module")
def url_like_fits():
    return {nprocs: fits(nprocs, ["log_loss"], "url-like")[0] for nprocs in (1, 2)}


@needs_a9a
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("nprocs", [2, 4])
def test_a9a_stops_within_an_epoch_of_one_rank_and_as_accurate(a9a_fits, loss, nprocs):
    one, many = a9a_fits[1][0][("a9a", loss)], a9a_fits[nprocs][0][("a9a", loss)]
    for (epochs_one, accuracy_one), (epochs, accuracy) in zip(one, many, strict=True):
        assert abs(epochs - epochs_one) <= 1, (one, many)
        assert abs(accuracy - accuracy_one) <= 0.003, (one, many)


@needs_a9a
@pytest.mark.parametrize("loss", LOSSES)
def test_a9a_on_four_ranks_exchanges_less_often_from_the_third_epoch(a9a_fits, loss):
    from sparcml_apps.training import exchange

    for steps, periods in a9a_fits[4][1][("a9a", loss)]:
        first = periods[0]
        # at least an exchange for every pair of ranks in the first epoch, and the second
        assert -(-steps // first) >= exchange.least_exchanges(4) and periods[1] == first
        # then fewer as the rate falls: the k-th epoch about k - 1 times fewer (a little
        # less: t0 of the "optimal" rate against an epoch of steps), evened out
        assert periods == sorted(periods) and all(p <= steps for p in periods)
        exchanges = [-(-steps // p) for p in periods]
        assert exchanges[2] < exchanges[0], (steps, periods)
        for k, n in enumerate(exchanges[2:], 3):
            assert n <= -(-steps // int(0.75 * (k - 1) * first)), (k, steps, periods)


def test_url_like_rows_stop_within_an_epoch_of_one_rank_on_the_mean(url_like_fits):
    # (hinge fits of these rows on two ranks go on gaining held-out accuracy for longer,
    # and end higher: they stop later, as they should)
    one, two = (
        url_like_fits[1][("url-like", "log_loss")],
        url_like_fits[2][("url-like", "log_loss")],
    )
    mean_one, mean_two = np.mean(one, axis=0), np.mean(two, axis=0)
    assert mean_two[0] <= mean_one[0] + 1, (one, two)
    assert abs(mean_two[1] - mean_one[1]) <= 0.003, (one, two)
