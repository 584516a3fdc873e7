"""Throughput of the static scan (`porting_cli.analysis.scan.scan_source`), in lines per second.

Generates a large script (default 20,000 lines) from model code, data code and
utilities that are device-agnostic, mixed with training functions full of
CUDA-specific calls (about one line in ten is CUDA-specific), then times the
scan. Target: at least 5,000 lines/s. Also checks that the scan never imports torch.

    python benchmarks/scan_throughput.py [--lines 20000] [--repeat 3] [--cuda-share 0.25]
"""

from __future__ import annotations

import argparse
import sys
import time

CLEAN = '''

class Block{i}(nn.Module):
    """Residual MLP block number {i}."""

    def __init__(self, width: int = 64, hidden: int = 256, dropout: float = 0.1):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.up(self.norm(x))
        h = torch.nn.functional.gelu(h)
        return x + self.drop(self.down(h))


def load_records_{i}(path, limit=None):
    records = []
    with open(path) as fh:
        for n, line in enumerate(fh):
            if limit is not None and n >= limit:
                break
            fields = line.rstrip("\\n").split(",")
            records.append({{"id": int(fields[0]), "text": fields[1], "label": float(fields[2])}})
    log.info("loaded %d records from %s", len(records), path)
    return records
'''

CUDA = '''

def train_{i}(model, loader, epochs=1):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.cuda()
    scaler = torch.cuda.amp.GradScaler()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.cuda(non_blocking=True)
            with torch.cuda.amp.autocast():
                loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        torch.cuda.synchronize()
        print(f"epoch {{epoch}}: loss {{loss.item():.3f}}")
    return torch.cuda.max_memory_allocated() / 2**20
'''

HEADER = '''"""Generated benchmark input."""
import logging
import torch
import torch.nn as nn

log = logging.getLogger(__name__)
torch.backends.cudnn.benchmark = True
'''


def make_source(lines: int, cuda_share: float) -> str:
    parts, n, i, cuda_lines = [HEADER], HEADER.count("\n"), 0, 0
    clean_len, cuda_len = CLEAN.count("\n"), CUDA.count("\n")
    while n < lines:
        if cuda_lines < cuda_share * n:
            parts.append(CUDA.format(i=i))
            n += cuda_len
            cuda_lines += cuda_len
        else:
            parts.append(CLEAN.format(i=i))
            n += clean_len
        i += 1
    return "".join(parts)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cuda-share", type=float, default=0.25,
                        help="share of lines in CUDA-using functions (default 0.25)")
    parser.add_argument("--full", action="store_true", help="also time the scan without the fast path")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    from porting_cli.analysis.scan import scan_source
    from porting_cli.analysis.scan.engine import analyze
    import_s = time.perf_counter() - t0

    source = make_source(args.lines, args.cuda_share)
    n_lines = source.count("\n")
    best, best_cpu, findings = float("inf"), float("inf"), 0
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        findings = len(scan_source(source, "bench.py").findings)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    print(f"lines: {n_lines}  findings: {findings}  import: {import_s * 1000:.0f} ms")
    print(f"scan_source: {best:.2f} s wall -> {n_lines / best:,.0f} lines/s; "
          f"{best_cpu:.2f} s CPU -> {n_lines / best_cpu:,.0f} lines/s "
          f"(best of {args.repeat}; target >= 5,000; wall time suffers on a busy machine)")
    if args.full:
        t0 = time.perf_counter()
        analyze(source, "bench.py", reduce=False)
        full = time.perf_counter() - t0
        print(f"without the fast path: {full:.2f} s  ->  {n_lines / full:,.0f} lines/s")
    print(f"'torch' in sys.modules: {'torch' in sys.modules}")


if __name__ == "__main__":
    main()
