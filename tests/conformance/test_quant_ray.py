"""`neuron-check quant --executor ray` on a 2-CPU node of the session's loopback Ray head
(tests/conformance/conftest.py; one worker, so torchao imports once) with the sim device: the Ray worker gives the statuses the local pool
gives (tests/conformance/test_quant.py), a fault on the integer matmul failing the one recipe
that runs it."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'neuron-check[ray]'")
pytest.importorskip("torchao")

from conformance.engine.config import RunConfig  # noqa: E402
from conformance.engine.local import run_items  # noqa: E402
from conformance.engine.ray_connect import join  # noqa: E402
from conformance.quant.plan import QuantOptions  # noqa: E402
from conformance.suite import plan as plan_command  # noqa: E402
from op_db.records import Status  # noqa: E402
from op_db.store import Store  # noqa: E402

INT_MM_FAULT = {"name": "quant-ray", "faults": [{"op": "aten.mm.default", "dtype": "int32", "kind": "offset", "value": 1}]}
EXPECTED = {"int8_dynamic_int8_weight": Status.MISMATCH, "int8_weight_only": Status.PASS}


def test_ray_workers_give_the_local_statuses(tmp_path, ray_head, ray_nodes):
    profile = tmp_path / "faults.json"
    profile.write_text(json.dumps(INT_MM_FAULT))
    options = QuantOptions(recipes=tuple(EXPECTED), targets=("linear.g64",), dtypes=("fp32",))
    items = plan_command("quant", options)
    ray_nodes.add(num_cpus=2)
    ray_head.wait_for_nodes()
    join(ray, ray_head.address, "127.0.0.1")  # as the executor joins a loopback cluster
    try:
        with Store.open(tmp_path / "runs.db") as store:
            config = RunConfig(backend="sim", device="sim", jobs=1, timeout_s=120.0, suite_options=options,
                               sim_profile=str(profile), executor="ray")
            run_id = store.create_run(backend="sim", device="sim", options={"executor": "ray"})
            run_items(items, config, store, run_id, progress=False)
            results = store.results(run_id)
    finally:
        ray.shutdown()
    assert {r.subject: r.status for r in results} == EXPECTED, [r.message for r in results]
    assert all(r.suite == "quant" and r.node for r in results)
