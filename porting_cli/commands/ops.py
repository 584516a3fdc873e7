"""`neuron-check ops`: PyTorch's OpInfo database on a backend, judged against CPU."""

from __future__ import annotations

import click

from porting_cli.options import db_option, device_option, executor_options, sim_profile_option, split_list

EXIT_INTERRUPTED = 130


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
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              help="Seconds one item may run before its worker is killed (TIMEOUT).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for sample generation and random ops.")
@click.option("--resume", "resume", default=None, help="Finish run RUN_ID: run only the items it has not stored yet.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), default=None, help="Write JUnit XML here.")
@click.option("--fail-on", "fail_on", default=None, help="Exit 1 if any item has one of these statuses (e.g. MISMATCH,ERROR,CRASH).")
@click.option("--strict-fallback", is_flag=True, help="Count FALLBACK as a failure (for --fail-on and JUnit).")
@executor_options
def command(device, sim_profile, db_path, ops, exclude, dtypes, grad, mode, compile_backend, shard, max_samples,
            reference_inputs, jobs, timeout_s, seed, resume, junit_path, fail_on, strict_fallback,
            executor, ray_address) -> int:
    """Run OpInfo ops on a device and compare every sample with CPU.

    \b
    neuron-check ops --device sim --ops add,mul --dtype fp32,bf16
    neuron-check ops --device neuron --jobs 4 --grad --junit ops.xml --fail-on MISMATCH,ERROR
    neuron-check ops --resume 12
    """
    from conformance.config import RunConfig
    from conformance.engine import run_items, start_run
    from conformance.planning import PlanOptions, parse_dtypes, parse_shard, plan
    from op_db.records import FAILING, Status
    from op_db.store import Store
    from porting_cli.options import executor_settings, resolve_device

    fail_statuses = {Status.parse(s) for s in split_list(fail_on)}
    if strict_fallback:
        fail_statuses.add(Status.FALLBACK)
    store = Store.open(db_path)
    if resume is not None:
        run_id = store.resolve_run(resume)
        stored = store.run(run_id)
        saved = stored["options"]
        if saved.get("suite") != "opinfo":
            from op_db.errors import InputError

            raise InputError(f"run {run_id} is not a `neuron-check ops` run, so `ops --resume` cannot finish it.")
        plan_options = PlanOptions.from_dict(saved)
        adapter, device_string = resolve_device(stored["device"], saved.get("sim_profile"))
        max_samples, reference_inputs, seed = saved.get("max_samples"), bool(saved.get("reference_inputs")), saved.get("seed", 0)
        compile_backend = saved.get("compile_backend")
    else:
        plan_options = PlanOptions(ops=tuple(split_list(ops)), exclude=tuple(split_list(exclude)),
                                   dtypes=tuple(parse_dtypes(split_list(dtypes))), grad=grad, mode=mode, shard=shard)
        parse_shard(shard)
        adapter, device_string = resolve_device(device, sim_profile)
    import os

    config = RunConfig(backend=adapter.name, device=device_string, mode=plan_options.mode,
                       compile_backend=compile_backend, jobs=jobs, timeout_s=timeout_s, seed=seed,
                       max_samples=max_samples, reference_inputs=reference_inputs,
                       sim_profile=os.environ.get("NEURON_CHECK_SIM_PROFILE") if adapter.name == "sim" else None,
                       **executor_settings(executor, ray_address))
    items = plan(plan_options, adapter.device_type)
    if resume is not None:
        done = store.stored_items(run_id)
        items = [item for item in items if item not in done]
    elif not items:
        from op_db.errors import InputError

        raise InputError("nothing to run: no chosen op supports the chosen dtypes on the CPU.")
    else:
        options = {"suite": "opinfo", **plan_options.to_dict(), "max_samples": max_samples,
                   "reference_inputs": reference_inputs, "seed": seed, "compile_backend": compile_backend,
                   "sim_profile": config.sim_profile, "jobs": jobs, "timeout_s": timeout_s}
        run_id = start_run(store, config, adapter, options)

    label = " (simulated)" if adapter.simulated else ""
    click.echo(f"run {run_id}: {len(items)} items on {device_string}{label}, {jobs} job(s)", err=True)
    summary = run_items(items, config, store, run_id, progress=True)
    results = store.results(run_id)
    from reports.render.summary import summary_table

    click.echo(summary_table(results, run_id=run_id, device=device_string, simulated=adapter.simulated,
                             interrupted=summary.interrupted))
    if junit_path:
        from reports.render.junit import write_junit

        failing = FAILING | ({Status.FALLBACK} if strict_fallback else set())
        write_junit(results, junit_path, suite_name=f"neuron-check ops run {run_id}", failing=frozenset(failing))
    store.close()
    if summary.interrupted:
        return EXIT_INTERRUPTED
    if fail_statuses and any(r.status in fail_statuses for r in results):
        return 1
    return 0
