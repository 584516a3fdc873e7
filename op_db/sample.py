"""Small, deterministic sample runs written straight into a store.

Tests of the store, the reports, the gate and the dashboard need results
without running a suite; benchmarks need many. Every status, a blocker op,
a fallback, dtype claims, a model and an FP8 item appear in the default set.
"""

from __future__ import annotations

from typing import Any

from op_db.records import Result, Status


def result(subject: str, dtype: str, status: str | Status, *, suite: str = "opinfo",
           variant: str = "forward", mode: str = "eager", **fields: Any) -> Result:
    status = Status(status)
    defaults: dict[str, Any] = {"samples": 3, "samples_passed": 3 if status == Status.PASS else 1,
                                "duration_s": 0.01}
    defaults.update(fields)
    return Result(suite, subject, variant, dtype, mode, status, **defaults)


def sample_results() -> list[Result]:
    """Twelve results covering every section of a report."""
    return [
        result("add", "float32", "PASS", aten_ops={"aten.add.Tensor": 3}, claimed=True, max_abs_err=0.0),
        result("add", "bfloat16", "PASS", aten_ops={"aten.add.Tensor": 3}, claimed=False, max_abs_err=0.004),
        result("mul", "float32", "PASS", aten_ops={"aten.mul.Tensor": 3}, claimed=True),
        result("mul", "bfloat16", "MISMATCH", claimed=True, failing_op="aten.mul.Tensor",
               max_abs_err=0.12, err_ratio=5.1, message="sample 1: max abs err 0.12 > tol",
               first_failure="sample 1: (3, 4) bfloat16"),
        result("cumprod", "float32", "UNSUPPORTED", failing_op="aten.cumprod.default", claimed=True,
               message="NotImplementedError: aten::cumprod is not implemented for sim"),
        result("cumprod", "bfloat16", "UNSUPPORTED", failing_op="aten.cumprod.default", claimed=False,
               message="NotImplementedError: aten::cumprod is not implemented for sim"),
        result("median", "float32", "FALLBACK", fallback_ops=["aten.median.default"],
               aten_ops={"aten.median.default": 1}, claimed=True),
        result("atan2", "float32", "CRASH", message="worker died with SIGSEGV"),
        result("erfinv", "float32", "TIMEOUT", message="item exceeded 60 s"),
        result("nonzero", "float32", "SKIP", samples=0, samples_passed=0, message="no samples"),
        result("llama", "float16", "ERROR", suite="model", variant="generate",
               failing_op="aten.cumprod.default", message="RuntimeError: boom", divergence="model.layers.0"),
        result("cast", "float8_e4m3fn", "PASS", suite="fp8", check="exact", claimed=True),
    ]


def write_sample_run(store: Any, results: list[Result] | None = None, **run: Any) -> int:
    """Create a finished run holding `results` (default: `sample_results()`); return its id."""
    meta = {"backend": "sim", "device": "sim", "simulated": True, "torch_version": "2.13.0",
            "command": "neuron-check ops --device sim"}
    meta.update(run)
    run_id = store.create_run(**meta)
    store.add_results(run_id, sample_results() if results is None else results)
    store.finish_run(run_id)
    return run_id
