"""The child process of `neuron-check trace`: the user's script under torch.profiler.

`python -m porting_cli.runtime.profiler_child CONFIG.json` (started by porting_cli/runtime/profiler.py).
The script runs exactly as in the porting trace (porting_cli/runtime/trace_child.py: `cuda`
remapped to the target, --max-steps counted on optimizer steps, --max-seconds by SIGALRM), under
torch.profiler with record_shapes and a schedule: `warmup` optimizer steps unrecorded, then
`steps` recorded. Each top-level torch call is tagged with its user line
(porting_cli/runtime/profiler_sites.py); when the window closes (or the script stops inside it)
the events are attributed (porting_cli/runtime/profiler_events.py) and written to OUT.json.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from porting_cli.runtime.trace_child import arm_time_limit, outcome_of, run_script
from porting_cli.runtime.trace_record import StopScript


def main(config_path: str) -> int:
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    out: dict[str, Any] = {"notes": []}

    def save() -> None:
        with open(config["out"], "w", encoding="utf-8") as handle:
            json.dump(out, handle, default=str)

    try:
        from conformance.backends.opening import resolve_device

        adapter, target = resolve_device(config.get("device"))
    except Exception as exc:  # noqa: BLE001 - told to the parent as one sentence
        out["setup_error"] = str(exc).rstrip(".") + "."
        save()
        return 2
    import torch
    import torch._dynamo  # noqa: F401 - imported before the clock starts (see trace_child)
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.profiler import ProfilerActivity, profile, schedule

    from porting_cli.runtime.frames import UserFrames
    from porting_cli.runtime.profiler_compile import CompileEvents, watch_compiles
    from porting_cli.runtime.profiler_events import event_rows, is_op
    from porting_cli.runtime.profiler_sites import make_site_mode
    from porting_cli.runtime.remap import RemapLog, remap_cuda
    from porting_cli.runtime.trace_record import install_step_limit

    device_type = torch.device(target).type
    frames = UserFrames(config["script"], config.get("root"), config.get("display_base"))
    activities = [ProfilerActivity.CPU]
    own = {"cuda": "CUDA", "xpu": "XPU", "mtia": "MTIA"}.get(device_type)
    if own is None and device_type not in ("cpu", "sim", "meta"):
        own = "PrivateUse1" if hasattr(ProfilerActivity, "PrivateUse1") else None
    device_timed = own is not None and getattr(ProfilerActivity, own, None) in torch.profiler.supported_activities()
    if device_timed:
        activities.append(getattr(ProfilerActivity, own))
    else:
        out["notes"].append(f"{adapter.name} has no profiler activity of its own: device time is the host "
                            "time of each op (exact for a synchronous device such as sim or cpu)")
    out.update(device=target, backend=adapter.name, simulated=adapter.simulated, device_timed=device_timed)
    warmup, steps = int(config["warmup"]), int(config["steps"])
    sites = make_site_mode(frames, device_type)
    fallback_names: set[str] = set()

    window: dict[str, Any] = {}

    def ready(prof: Any) -> None:
        # Only mark the window closed: reading its events (event_rows, the Chrome export) waits
        # until the script has stopped, so that it is not paid inside the script's own steps.
        window["closed"] = prof

    def read_window(prof: Any) -> None:
        if config.get("chrome_trace"):
            prof.export_chrome_trace(config["chrome_trace"])
            finish_chrome_trace(config["chrome_trace"], sites.sites)
        rows, ranges = event_rows(list(prof.events()), sites.sites, fallback_names, device_timed, warmup + 1)
        out["events"], out["ranges"] = rows, ranges
        # the profiler's own total, through its own aggregation: what the lines must add up to
        field = "self_device_time_total" if device_timed else "self_cpu_time_total"
        out["profiler_total_s"] = sum(getattr(a, field) for a in prof.key_averages() if is_op(a.key)) * 1e-6

    prof = profile(activities=activities, record_shapes=True,
                   schedule=schedule(wait=warmup, warmup=0, active=max(steps, 1), repeat=1),
                   on_trace_ready=ready)
    counted = {"n": 0}

    def step(optimizer: Any, args: Any, kwargs: Any) -> None:
        counted["n"] += 1
        prof.step()

    step_hook = register_optimizer_step_post_hook(step)  # before the limit's hook: the step is recorded
    limit_hook, _ = install_step_limit(int(config.get("max_steps") or 0), lambda n: None)
    log = RemapLog(frames)
    compiles = CompileEvents(frames)
    stopped: BaseException | None = None
    started = time.monotonic()
    try:
        with adapter.track_fallbacks() as fallbacks, remap_cuda(target, log, adapter):
            started = time.monotonic()
            arm_time_limit(config.get("max_seconds"))
            prof.start()
            try:
                with sites, watch_compiles(compiles):
                    _, stopped = run_script(config["script"], list(config.get("args") or []))
            finally:
                if hasattr(signal, "setitimer"):
                    signal.setitimer(signal.ITIMER_REAL, 0)
                fallback_names.update(_aten_name(op) for op in _fallback_ops(adapter, fallbacks))
                prof.stop()
    except StopScript as exc:
        stopped = stopped or exc
    finally:
        step_hook.remove()
        limit_hook.remove()
    if "closed" in window:
        read_window(window["closed"])
    if "events" not in out:
        out["notes"].append(f"the profiled window was not reached: the script made {counted['n']} optimizer "
                            f"step(s) and --warmup is {warmup}")
        out["events"], out["ranges"] = [], []
    for row in out["events"]:  # the window may close before the fallback log is read
        row["fallback"] = row["op"] in fallback_names
    out["fallbacks"] = sorted(fallback_names)
    out["compile_events"] = compiles.events
    out["optimizer_steps"] = counted["n"]
    out["end"] = dict(outcome_of(stopped, frames), seconds=round(time.monotonic() - started, 3))
    save()
    return 0


def finish_chrome_trace(path: str, sites: list[dict[str, Any]]) -> None:
    """Make the exported trace readable by people and by Holistic Trace Analysis: each `nc|N` range
    is renamed to its user line and call ("train.py:41 matmul"), and the trace names its rank
    (`distributedInfo`, which HTA keys traces by; without it HTA warns and assumes rank 0)."""
    from porting_cli.runtime.profiler_sites import RANGE_PREFIX

    with open(path, encoding="utf-8") as handle:
        trace = json.load(handle)
    for event in trace.get("traceEvents", []):
        name = event.get("name")
        if isinstance(name, str) and name.startswith(RANGE_PREFIX) and name[len(RANGE_PREFIX):].isdigit():
            index = int(name[len(RANGE_PREFIX):])
            if index < len(sites):
                site = sites[index]
                event["name"] = f"{site['site'] or '(no user line)'} {site['call']}"
                event.setdefault("args", {})["neuron_check_range"] = name
    trace.setdefault("distributedInfo", {"rank": int(os.environ.get("RANK", "0") or 0)})
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(trace, handle)


def _fallback_ops(adapter: Any, tracker: Any) -> list[str]:
    ops = dict(getattr(tracker, "ops", {}) or {})
    if adapter.name == "sim":
        import conformance.sim as sim

        ops.update(sim.fallback_log())
    return list(ops)


def _aten_name(op: str) -> str:
    """'aten.median.default' or 'aten::median' -> 'aten::median' (how profiler events name it)."""
    op = op.replace("::", ".")
    parts = op.split(".")
    return f"{parts[0]}::{parts[1]}" if len(parts) > 1 else op


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
