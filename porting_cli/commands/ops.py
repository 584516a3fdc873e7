"""`neuron-check ops`: PyTorch's OpInfo database on a backend, judged against CPU."""

from __future__ import annotations

import click

from porting_cli.options import (
    db_option, device_option, engine_options, executor_options, sim_profile_option, split_list,
)
from porting_cli.options import series_option

SUITE = "opinfo"


@click.command("ops")
@device_option
@sim_profile_option
@db_option
@click.option("--ops", "ops", default=None, help="Comma list of OpInfo full names (mul, nn.functional.relu, "
              "normal.in_place) and globs ('nn.functional.*'). Default: every op.")
@click.option("--exclude", default=None, help="Comma list of names or globs to leave out.")
@click.option("--dtype", "dtypes", default="fp32,bf16,fp16", show_default=True,
              help="Comma list: fp32, bf16, fp16, fp8 (the FP8 suite) or torch dtype names.")
@click.option("--grad", is_flag=True, help="Also check gradients (the backward variant).")
@click.option("--mode", type=click.Choice(["eager", "compile"]), default="eager", show_default=True,
              help="compile: run the op through torch.compile with the backend's compiler.")
@click.option("--compile-backend", default=None, help="torch.compile backend to use instead of the device's own.")
@click.option("--shard", default=None, help="Run only shard K of N (K/N); shards split the plan deterministically.")
@click.option("--max-samples", type=click.IntRange(min=1), default=None, help="At most N samples per item.")
@click.option("--reference-inputs", is_flag=True, help="Use OpInfo's larger reference_inputs instead of sample_inputs.")
@click.option("--expect-rounding", default=None, metavar="CLASS",
              help="The rounding the device must show where the CPU rounds to nearest even: nearest-even, "
              "toward-zero, stochastic or double-rounding. Default: anything but toward-zero and double-rounding.")
@engine_options(default_timeout=120.0)
@executor_options
@series_option
def command(device, sim_profile, db_path, ops, exclude, dtypes, grad, mode, compile_backend, shard, max_samples,
            reference_inputs, expect_rounding, jobs, timeout_s, seed, resume, junit_path, fail_on, strict_fallback,
            run_group, executor, ray_address, series=None) -> int:
    """Run OpInfo ops on a device and compare every sample with CPU.

    \b
    neuron-check ops --device sim --ops add,mul --dtype fp32,bf16
    neuron-check ops --device neuron --jobs 4 --grad --junit ops.xml --fail-on MISMATCH,ERROR
    neuron-check ops --resume 12
    """
    import os

    from op_db.records import parse_rounding

    expect_rounding = parse_rounding(expect_rounding) if expect_rounding is not None else None

    from conformance.engine import prestart_workers
    from porting_cli.options import executor_settings

    prestart_workers(jobs, (SUITE,), executor_settings(executor, ray_address)["executor"])  # they import op_db while we plan

    from conformance.config import RunConfig
    from conformance.engine import start_run
    from conformance.planning import PlanOptions, parse_dtypes, parse_shard, plan
    from op_db.errors import InputError
    from op_db.inventory import store_coverage
    from op_db.store import Store
    from porting_cli.options import (
        check_outputs, fail_statuses, resolve_device, resume_run, run_and_report, selection,
    )
    from porting_cli.resume import requested_sim_profile

    failing = fail_statuses(fail_on, strict_fallback)
    check_outputs(junit_path)
    requested = PlanOptions(ops=tuple(selection(ops, "--ops")), exclude=tuple(split_list(exclude)),
                            dtypes=tuple(parse_dtypes(selection(dtypes, "--dtype"))), grad=grad, mode=mode,
                            shard=shard)
    parse_shard(shard)
    fresh = {"suite": SUITE, **requested.to_dict(), "max_samples": max_samples, "reference_inputs": reference_inputs,
             "seed": seed, "compile_backend": compile_backend, "run_group": run_group, "series": series,
             "expect_rounding": expect_rounding}
    store = Store.open(db_path)
    if resume is not None:
        run_id, saved, adapter, device_string = resume_run(
            store, resume, SUITE, "ops",
            {**fresh, "timeout_s": timeout_s, "sim_profile": requested_sim_profile(sim_profile)})
        plan_options = PlanOptions.from_dict(saved)
        timeout_s = saved.get("timeout_s", timeout_s)
    else:
        plan_options, saved = requested, fresh
        adapter, device_string = resolve_device(device, sim_profile)

    config = RunConfig(backend=adapter.name, device=device_string, mode=plan_options.mode,
                       compile_backend=saved.get("compile_backend"), jobs=jobs, timeout_s=timeout_s,
                       seed=saved.get("seed", 0), max_samples=saved.get("max_samples"),
                       reference_inputs=bool(saved.get("reference_inputs")),
                       sim_profile=os.environ.get("NEURON_CHECK_SIM_PROFILE") if adapter.name == "sim" else None,
                       options={"expect_rounding": saved.get("expect_rounding")},
                       **executor_settings(executor, ray_address))
    items = plan(plan_options, adapter.device_type)
    if resume is not None:
        done = store.stored_items(run_id)
        items = [item for item in items if item not in done]
    elif not items:
        raise InputError("nothing to run: no chosen op supports the chosen dtypes on the CPU.")
    else:
        run_id = start_run(store, config, adapter, {**saved, "sim_profile": config.sim_profile,
                                                   "jobs": jobs, "timeout_s": timeout_s})
        store_coverage(store, run_id, adapter)
    try:
        return run_and_report(store, items, config, adapter, run_id, command_name="ops", junit_path=junit_path,
                              failing_statuses=failing, strict_fallback=strict_fallback)
    finally:
        store.close()
