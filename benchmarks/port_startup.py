"""Start-up time of `neuron-check SCRIPT.py --static-only`, and proof that it never imports torch.

    python benchmarks/port_startup.py [--repeat 5] [SCRIPT.py]

Prints the median and best wall time of the whole command (a fresh interpreter each time, as a
user or CI job runs it), the same for `python -c pass` and `python -c "import torch"` for scale,
and whether torch was imported (checked in-process through sys.modules after the command ran).
Scan throughput on a large file is benchmarks/scan_throughput.py's job.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SCRIPT = REPO / "examples" / "gpt_amp_train.py"
PROBE = (
    "import sys\n"
    "from porting_cli.cli.app import main\n"
    "try:\n"
    "    main([{script!r}, '--static-only', '--format', 'json', '-o', {null!r}])\n"
    "except SystemExit as exc:\n"
    "    assert exc.code == 0, exc.code\n"
    "print('torch imported' if 'torch' in sys.modules else 'torch not imported')\n"
)


def timed(argv: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=REPO, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", nargs="?", default=str(DEFAULT_SCRIPT))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    null = "NUL" if sys.platform == "win32" else "/dev/null"
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("neuron-check SCRIPT --static-only", [sys.executable, "-m", "porting_cli", args.script, "--static-only",
                                               "--format", "json", "-o", null]),
        ("python -c 'import torch'", [sys.executable, "-c", "import torch"]),
    ]
    print(f"script: {args.script}  repeat: {args.repeat}")
    for label, argv in rows:
        times = timed(argv, args.repeat)
        print(f"{label:36s} median {statistics.median(times):6.3f} s   best {min(times):6.3f} s")
    probe = subprocess.run([sys.executable, "-c", PROBE.format(script=args.script, null=null)], cwd=REPO,
                           capture_output=True, text=True, check=True)
    print(f"--static-only: {probe.stdout.strip()}")


if __name__ == "__main__":
    main()
