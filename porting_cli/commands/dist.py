"""`neuron-check dist`: collectives, training-step parity and streams on N ranks of a backend."""

from __future__ import annotations

import click

from porting_cli.options import db_option, device_option, engine_options, series_option, sim_profile_option, split_list

SUITE = "dist"


@click.command("dist")
@device_option
@sim_profile_option
@db_option
@click.option("--world-size", type=int, default=2, show_default=True, help="Ranks per world (local processes).")
@click.option("--dtype", "dtypes", default="fp32,bf16", show_default=True, help="Comma list: fp32, bf16, fp16.")
@click.option("--parts", default="collectives,parity,streams", show_default=True,
              help="Comma list of what to check: collectives, parity, streams.")
@click.option("--collectives", default=None, help="Comma list of collective names or globs (all_reduce.*, broadcast).")
@engine_options(default_timeout=120.0)
@series_option
def command(device, sim_profile, db_path, world_size, dtypes, parts, collectives, jobs, timeout_s, seed, resume,
            junit_path, fail_on, strict_fallback, run_group, series=None) -> int:
    """Start N ranks on this host with the device's process-group backend (sim: gloo underneath)
    and check collectives x dtypes x layouts, a 2-step training step single/DDP/FSDP2/FSDP2+TP
    against one CPU process, and stream/event ordering. --jobs runs that many worlds at once.

    \b
    neuron-check dist --device sim --world-size 2
    neuron-check dist --device sim --sim-profile faults.json --parts collectives --fail-on MISMATCH
    neuron-check dist --device cuda --world-size 4 --junit dist.xml --fail-on MISMATCH,ERROR,CRASH,TIMEOUT
    neuron-check dist --resume 12
    """
    from conformance.config import RunConfig
    from conformance.dist.plan import DistOptions, plan
    from conformance.dist.process_group import backend_for, check_world_size
    from conformance.dist.world import WorldExecutor, WorldSpec
    from conformance.engine import start_run
    from conformance.planning import parse_dtypes
    from op_db.store import Store
    from porting_cli.options import fail_statuses, resolve_device, resume_run, run_and_report

    failing = fail_statuses(fail_on, strict_fallback)
    store = Store.open(db_path)
    try:
        if resume is not None:
            run_id, saved, adapter, device_string = resume_run(store, resume, SUITE, "dist")
            options = DistOptions.from_dict(saved)
        else:
            adapter, device_string = resolve_device(device, sim_profile)
            options = DistOptions(world_size=world_size, dtypes=tuple(parse_dtypes(split_list(dtypes))),
                                  parts=tuple(split_list(parts)), collectives=tuple(split_list(collectives)))
            saved = {"suite": SUITE, **options.to_dict(), "seed": seed, "run_group": run_group, "series": series}
        check_world_size(options.world_size, adapter)
        backend_for(adapter)
        items = plan(options)
        import os

        config = RunConfig(backend=adapter.name, device=device_string, jobs=jobs, timeout_s=timeout_s,
                           seed=saved.get("seed", 0), options={"world_size": options.world_size},
                           sim_profile=os.environ.get("NEURON_CHECK_SIM_PROFILE") if adapter.name == "sim" else None)
        if resume is not None:
            done = store.stored_items(run_id)
            items = [item for item in items if item not in done]
        else:
            run_id = start_run(store, config, adapter, {**saved, "sim_profile": config.sim_profile,
                                                       "jobs": jobs, "timeout_s": timeout_s})
        executor = WorldExecutor(WorldSpec.for_config(config, adapter))
        return run_and_report(store, items, config, adapter, run_id, command_name="dist", junit_path=junit_path,
                              failing_statuses=failing, strict_fallback=strict_fallback, executor=executor)
    finally:
        store.close()
