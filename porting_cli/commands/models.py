"""`neuron-check models`: tiny Transformers models of every architecture on a backend, against CPU."""

from __future__ import annotations

import click

from porting_cli.options import (
    db_option, device_option, engine_options, executor_options, format_option, sim_profile_option, split_list,
)
from porting_cli.options import series_option

SUITE = "model"


@click.command("models")
@device_option
@sim_profile_option
@db_option
@click.option("--arch", "archs", default=None, help="Comma list of model types or globs (llama, 'qwen*'). Default: all.")
@click.option("--task", "tasks", default=None, help="Comma list of tasks: causal-lm, seq2seq-lm, masked-lm, "
              "sequence-classification, image-classification, image-text-to-text.")
@click.option("--dtype", "dtypes", default="fp32,bf16", show_default=True, help="Comma list: fp32, bf16, fp16.")
@click.option("--mode", "modes", default="eager", show_default=True,
              help="Comma list: eager, compile (forward and backward through torch.compile).")
@click.option("--compile-backend", default=None, help="torch.compile backend to use instead of the device's own.")
@click.option("--grad", is_flag=True, help="Also run loss.backward() and compare every parameter gradient.")
@click.option("--generate", is_flag=True, help="Also greedy-decode 8 tokens and require the CPU's exact tokens.")
@click.option("--attn", type=click.Choice(["eager", "sdpa"]), default="eager", show_default=True,
              help="Attention implementation the models are built with.")
@click.option("--no-divergence", is_flag=True, help="Do not rerun a MISMATCH under hooks to find its first divergent module.")
@click.option("--list", "list_only", is_flag=True, help="List the model types with their task; run nothing.")
@click.option("--check-build", is_flag=True, help="With --list: build every listed type tiny (in worker processes) "
              "and show its build status.")
@format_option("table", "json")
@engine_options(default_timeout=300.0)
@executor_options
@series_option
def command(device, sim_profile, db_path, archs, tasks, dtypes, modes, compile_backend, grad, generate, attn,
            no_divergence, list_only, check_build, fmt, jobs, timeout_s, seed, resume, junit_path, fail_on,
            strict_fallback, run_group, executor, ray_address, series=None) -> int:
    """Build tiny Transformers models from their default configs and run them on a device:
    logits (and with --grad gradients, with --generate greedy tokens) against CPU.

    \b
    neuron-check models --list --task causal-lm
    neuron-check models --device sim --arch llama,gpt2,bert,t5,vit --dtype fp32,bf16
    neuron-check models --device neuron --task causal-lm --grad --generate -j 4 --fail-on MISMATCH,ERROR
    neuron-check models --resume 7
    """
    from conformance.models.plan import plan

    if list_only or check_build:
        _list(split_list(archs), split_list(tasks), check_build, fmt, jobs)
        return 0
    from op_db.store import Store
    from porting_cli.options import (
        check_outputs, executor_settings, fail_statuses, resolve_device, resume_run, run_and_report, selection,
    )
    from porting_cli.resume import requested_sim_profile

    failing = fail_statuses(fail_on, strict_fallback)
    check_outputs(junit_path)
    fresh = {"suite": SUITE, "archs": selection(archs, "--arch"), "tasks": selection(tasks, "--task"),
             "dtypes": selection(dtypes, "--dtype"), "modes": selection(modes, "--mode"), "grad": grad,
             "generate": generate, "attn": attn, "divergence": not no_divergence, "seed": seed,
             "compile_backend": compile_backend, "run_group": run_group, "series": series}
    store = Store.open(db_path)
    if resume is not None:
        run_id, saved, adapter, device_string = resume_run(
            store, resume, SUITE, "models",
            {**fresh, "timeout_s": timeout_s, "sim_profile": requested_sim_profile(sim_profile)},
            renamed={"no_divergence": "divergence"})
        timeout_s = saved.get("timeout_s", timeout_s)
    else:
        saved = fresh
        adapter, device_string = resolve_device(device, sim_profile)
    items = plan(saved["archs"], saved["tasks"], saved["dtypes"], saved["modes"], saved["grad"], saved["generate"])
    config = _config(adapter, device_string, saved, jobs, timeout_s).with_(**executor_settings(executor, ray_address))
    if resume is not None:
        done = store.stored_items(run_id)
        items = [item for item in items if item not in done]
    else:
        from conformance.engine import start_run

        run_id = start_run(store, config, adapter, {**saved, "sim_profile": config.sim_profile,
                                                   "jobs": jobs, "timeout_s": timeout_s})
    try:
        return run_and_report(store, items, config, adapter, run_id, command_name="models", junit_path=junit_path,
                              failing_statuses=failing, strict_fallback=strict_fallback)
    finally:
        store.close()


def _config(adapter, device_string: str, saved: dict, jobs: int, timeout_s: float):
    import os

    from conformance.config import RunConfig

    return RunConfig(
        backend=adapter.name, device=device_string, mode=(saved["modes"] or ["eager"])[0],
        compile_backend=saved.get("compile_backend"), jobs=jobs, timeout_s=timeout_s, seed=saved.get("seed", 0),
        sim_profile=os.environ.get("NEURON_CHECK_SIM_PROFILE") if adapter.name == "sim" else None,
        options={"attn": saved.get("attn", "eager"), "divergence": saved.get("divergence", True)},
    )


def _list(archs: list[str], tasks: list[str], check_build: bool, fmt: str, jobs: int) -> None:
    from conformance.models import zoo

    entries = zoo.select(archs, tasks)
    rows = [entry.to_dict() for entry in entries]
    if check_build:
        from conformance.models.census import OK, build_status

        status = build_status([e.model_type for e in entries], jobs=jobs)
        for row in rows:
            row["build"], seconds = status.get(row["model_type"], ("build failed: worker lost", 0.0))
            row["build_s"] = round(seconds, 3)
    summary: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = summary.setdefault(row["task"], {"types": 0, **({"built": 0} if check_build else {})})
        counts["types"] += 1
        if check_build and row["build"] == OK:
            counts["built"] += 1
    from reports.sanitize import dumps_json, echo, for_terminal

    if fmt == "json":
        echo(dumps_json({"schema": 1, "models": rows, "summary": summary}, indent=2))
        return
    from tabulate import tabulate

    headers = ["model_type", "task", "class"] + (["build"] if check_build else [])
    table = [[r["model_type"], r["task"], r["class_name"]]
             + ([for_terminal(_short(r["build"]), one_line=True)] if check_build else []) for r in rows]
    echo(tabulate(table, headers=headers))
    totals = [[task, c["types"]] + ([c["built"]] if check_build else []) for task, c in summary.items()]
    echo("")
    echo(tabulate(totals, headers=["task", "types"] + (["built"] if check_build else [])))


def _short(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
