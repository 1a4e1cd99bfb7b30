"""`etk bench --scheduler`: the same runs on a Dask LocalCluster give the same records."""

from __future__ import annotations

import pytest

from toolkit.cli import main

from .helpers import records, write_suite

distributed = pytest.importorskip("distributed")


def test_suite_on_a_dask_local_cluster_matches_the_local_pool(tiny_bench, tmp_path):
    _, local_out, _ = tiny_bench
    suite = write_suite(tmp_path / "s.toml", models=["zoo:linear_relu6"], npus=["ethos-u55-128"])
    out = tmp_path / "out"
    with distributed.LocalCluster(
        n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        assert (
            main(["bench", str(suite), "--out", str(out), "--scheduler", cluster.scheduler_address])
            == 0
        )
    local = {r["key"]: r for r in records(local_out)}
    remote = records(out)
    assert len(remote) == 2 and {r["spec"]["variant"] for r in remote} == {"fused", "unfused"}
    for r in remote:
        assert r["status"] == "ok"
        same = local[r["key"]]  # the run key does not depend on where the run ran
        assert r["cycles"] == same["cycles"] and r["outputs"] == same["outputs"]


def test_unreachable_scheduler_is_a_user_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("toolkit.bench.dask_pool.CONNECT_TIMEOUT_S", 1)
    suite = write_suite(tmp_path / "s.toml", models=["zoo:linear_relu6"], npus=["ethos-u55-128"])
    assert (
        main(
            [
                "bench",
                str(suite),
                "--out",
                str(tmp_path / "out"),
                "--scheduler",
                "tcp://127.0.0.1:9",
            ]
        )
        == 2
    )
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err
