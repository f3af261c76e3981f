"""Dask executor: a small sweep on a LocalCluster of 2 worker processes gives the numbers of 'local'. Dask is an extra
(``recallkit[dask]``): without it these tests are skipped, and test_dask_missing.py checks the one line it gives."""
from __future__ import annotations

import pytest

pytest.importorskip("distributed")

from recallkit.empirics.executors import DaskExecutor, LocalExecutor, make_executor  # noqa: E402
from recallkit.empirics.experiment import experiment_from_dict  # noqa: E402
from recallkit.empirics.search import run_sweep  # noqa: E402
from recallkit.empirics.store import ResultStore  # noqa: E402
from recallkit.theory.errors import InputError  # noqa: E402

pytestmark = pytest.mark.integration

SMALL = {
    "name": "dask_small", "task": "token_retrieval", "model": "attention-only", "trainer": "three_step",
    "kind": "min_size", "thresholds": [0.1, 0.2],
    "lines": [{"scaling": "N=V*log(V), L=V**0.5"}],
    "fixed": {"eta": 1.0, "gamma": 1e7, "n_eval": 512},
    "search": {"min": 2, "max": 128, "start": "V/2"},
    "presets": {"quick": {"V": [32, 64], "seeds": [0, 1]}},
}
COMPARED = ("accuracy", "train_accuracy", "loss", "attention_mass", "param_count")


def test_local_cluster_gives_the_same_numbers_as_local(tmp_path):
    exp = experiment_from_dict(SMALL, "small.toml")
    with ResultStore(tmp_path / "local.db") as store:
        local = run_sweep(exp, store, LocalExecutor(threads=1), log=None)
        local_rows = {r["config_hash"]: r["metrics"] for r in store.rows()}
    executor = DaskExecutor(local_workers=2, threads=1)
    try:
        workers = executor.client.scheduler_info()["workers"]
        assert len(workers) == 2 and all(w["nthreads"] == 1 for w in workers.values())
        with ResultStore(tmp_path / "dask.db") as store:
            remote = run_sweep(exp, store, executor, log=None)
            remote_rows = {r["config_hash"]: r["metrics"] for r in store.rows()}
    finally:
        executor.close()
    assert remote.computed == local.computed > 0
    assert remote.points == local.points
    assert remote_rows.keys() == local_rows.keys()
    for h, metrics in local_rows.items():
        assert {k: remote_rows[h][k] for k in COMPARED} == {k: metrics[k] for k in COMPARED}
    assert remote.executor.startswith("dask LocalCluster(2 workers)")


def test_executor_flags_are_checked():
    with pytest.raises(InputError, match="exactly one of --scheduler"):
        make_executor("dask")
    with pytest.raises(InputError, match="only with --executor dask"):
        make_executor("local", local_workers=2)
    with pytest.raises(InputError, match="--executor: expected local or dask"):
        make_executor("slurm")


def test_a_scheduler_address_that_is_not_a_dask_scheduler_is_one_line():
    """A --scheduler that answers, but not as a Dask scheduler (here an HTTP reply), ended in numpy's
    ArrayMemoryError: distributed read the reply as a frame length of 3 EiB."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]

    def answer() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" * 4)

    threading.Thread(target=answer, daemon=True).start()
    try:
        with pytest.raises(InputError, match=rf"^--scheduler: cannot connect to tcp://127.0.0.1:{port}: .*Dask"):
            make_executor("dask", scheduler=f"tcp://127.0.0.1:{port}")
    finally:
        server.close()
