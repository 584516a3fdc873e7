"""What `neuron-check trace` costs, and whether its lines add up (issue 42).

    python benchmarks/trace_overhead.py [--device sim] [--steps 20] [--warmup 2] [--repeat 3]

One synthetic training script (written here: an MLP and a small attention block, a sync per step)
is run three ways on the device, each in a fresh process:

- **plain**: the script alone, no profiler;
- **profiler**: the script under a plain `torch.profiler.profile(record_shapes=True)` with the
  same schedule as the trace (wait = warm-up steps, active = the profiled steps);
- **trace**: `neuron-check trace SCRIPT --warmup W --steps N --format json`.

The script writes the time of every optimizer step to a file, so each run's *window* (from the
end of the last warm-up step to the end of the last profiled step) is measured the same way in
all three. Printed: the median window of each over `--repeat` runs, the trace's overhead against
the plain profiler (target: at most 1.2x) and against no profiler, and the attribution check:
the per-line device times of the trace's JSON against the profiler's own total (target: within
1%).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = '''
import os, sys, time
import torch

STAMPS = os.environ["TRACE_BENCH_STAMPS"]
PROFILE = os.environ.get("TRACE_BENCH_PROFILE")  # "W,N": under a plain torch.profiler
STEPS = int(os.environ["TRACE_BENCH_STEPS"])


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        x = x + self.out(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
        return x + self.mlp(x)


device = "cuda"
model = torch.nn.Sequential(Block(64), Block(64), torch.nn.Linear(64, 10)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
stamps = []
prof = None
if PROFILE:
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.profiler import ProfilerActivity, profile, schedule
    wait, active = (int(v) for v in PROFILE.split(","))
    prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                   schedule=schedule(wait=wait, warmup=0, active=active, repeat=1))
    register_optimizer_step_post_hook(lambda *a: prof.step())
    prof.start()
for step in range(STEPS):
    x = torch.randn(8, 32, 64, device=device)
    target = torch.randint(0, 10, (8, 32), device=device)
    loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), target.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
    loss.item()
    stamps.append(time.perf_counter())
if prof is not None:
    prof.stop()
with open(STAMPS, "w") as handle:
    handle.write(" ".join(map(str, stamps)))
'''


def window(stamps_file: Path, warmup: int, steps: int) -> float:
    stamps = [float(v) for v in stamps_file.read_text().split()]
    start = stamps[warmup - 1] if warmup else None
    if start is None:
        raise SystemExit("--warmup must be at least 1: the window starts at the end of a warm-up step")
    return stamps[warmup + steps - 1] - start


def run(way: str, folder: Path, device: str, warmup: int, steps: int) -> tuple[float, dict | None]:
    stamps = folder / f"stamps-{way}.txt"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRACE_BENCH_STAMPS=str(stamps),
               TRACE_BENCH_STEPS=str(warmup + steps))
    env.pop("TRACE_BENCH_PROFILE", None)
    script = folder / "bench_train.py"
    report = None
    if way == "trace":
        line = [sys.executable, "-m", "porting_cli", "trace", str(script), "--device", device,
                "--warmup", str(warmup), "--steps", str(steps), "--max-steps", "0", "--format", "json"]
    else:
        # plain and profiler run the script as the porting runtime would see it: `cuda` is the
        # target, so the device is remapped the same way (neuron-check's remap, no profiler of ours)
        line = [sys.executable, "-c", _REMAPPED.format(device=device, script=str(script))]
        if way == "profiler":
            env["TRACE_BENCH_PROFILE"] = f"{warmup},{steps}"
    done = subprocess.run(line, cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{way} run failed (exit {done.returncode}): "
                         f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    if way == "trace":
        report = json.loads(done.stdout)
    return window(stamps, warmup, steps), report


# The script's `cuda` is remapped to the device through the porting runtime's own remap, so that
# only the profiling differs between the three ways.
_REMAPPED = """
import runpy
from conformance import backends
from porting_cli.runtime.remap import RemapLog, remap_cuda
from porting_cli.runtime.frames import UserFrames
adapter, target = backends.resolve({device!r})
adapter.init()
with remap_cuda(target, RemapLog(UserFrames({script!r}, None, None)), adapter):
    runpy.run_path({script!r}, run_name="__main__")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="sim")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trace-overhead-") as tmp:
        folder = Path(tmp)
        (folder / "bench_train.py").write_text(SCRIPT)
        windows: dict[str, list[float]] = {"plain": [], "profiler": [], "trace": []}
        report = None
        for _ in range(args.repeat):
            for way in windows:  # interleaved, so that a change of load falls on every way alike
                seconds, found = run(way, folder, args.device, args.warmup, args.steps)
                windows[way].append(seconds)
                report = found or report
    median = {way: statistics.median(values) for way, values in windows.items()}
    print(f"{args.steps} profiled steps after {args.warmup} warm-up on {args.device}, median of {args.repeat} "
          f"(load {os.getloadavg()[0]:.1f}):")
    for way, seconds in median.items():
        print(f"  {way:<9}{seconds:8.3f} s window   ({', '.join(f'{v:.3f}' for v in windows[way])})")
    print(f"trace overhead: {median['trace'] / median['profiler']:.2f}x the plain torch.profiler (target <= 1.2x), "
          f"{median['trace'] / median['plain']:.2f}x no profiler")
    lines = sum(row["device_time_s"] for row in report["lines"])
    total = report["profiler_total_s"]
    print(f"attribution: the lines' device time {lines:.6f} s, the profiler's total {total:.6f} s: "
          f"{abs(lines - total) / total * 100:.3f}% apart (target <= 1%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
