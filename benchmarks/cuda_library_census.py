"""Census of CUDA-only Python packages: the seed of porting_cli/analysis/scan/cuda_libraries.json.

Reads a PyPI package list (name, version, month, download rank among the 15,000 most
downloaded, summary; tab-separated, one package a line) and keeps the ranked packages whose
name or summary says they are built on CUDA: CUDA, cuDNN, NCCL, NVIDIA GPU, Triton kernels,
flash attention, CUTLASS, bitsandbytes-style k-bit kernels. Prints them most-downloaded first,
with the signal that selected each, as JSON lines (``--tsv`` for a table).

    python benchmarks/cuda_library_census.py [--packages PATH] [--tsv]

With ``--installed`` it also reports, for each distribution installed in this environment,
the evidence porting_cli.analysis.scan.libraries reads from a distribution (shared objects linking
libcudart/libcuda, Triton kernels, CUDA requirements): the same check the scan makes for an
import it has no entry for.

How the seed was made (see docs/porting-recall.md): this census over the 15,000 most-downloaded
packages gave the candidates; nvidia-* runtime wheels (libraries a package links, never
imported by a script) and clients of NVIDIA web services were left out; each remaining
package was classed by what its own summary and documentation say it provides: CUDA kernels
with no CPU path (blocks the port), a CPU or PyTorch fallback, or a named PyTorch replacement.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

DEFAULT_LIST = Path("/work/.library/env/packages/pypi.tsv")
NAME_SIGNAL = re.compile(r"cuda|cudnn|nccl|nvidia|cupy|triton|flash[-_]?attn|flash-attention|flashinfer|"
                         r"cutlass|xformers|bitsandbytes|tensorrt|apex|mamba|causal-conv1d|liger|gptq|awq|"
                         r"exllama|marlin|deepspeed|vllm|transformer-engine|nvtx|pynvml|rmm|cudf|numba", re.I)
SUMMARY_SIGNAL = re.compile(r"\bcuda\b|cudnn|\bnccl\b|nvidia gpu|triton kernels?|cuda kernels?|gpu kernels?|"
                            r"flash attention|cutlass|k-bit|8-bit optimi|quantization kernels?|"
                            # packages that ship kernels without saying CUDA: read each one's docs
                            r"quantiz|faster training|rasteriz|\bnerf\b|scatter operations|"
                            r"sparse convolution|runtime accelerator|nvidia-smi|nvidia management|nvidia-gpu", re.I)


def census(path: Path):
    """(rank, name, signal, summary) of every ranked package with a CUDA signal."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        next(handle)  # header
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 5 or not parts[3].strip():
                continue
            name, rank, summary = parts[0], int(parts[3]), parts[4]
            signal = NAME_SIGNAL.search(name) or SUMMARY_SIGNAL.search(summary)
            if signal:
                yield rank, name, signal.group(0).lower(), summary


def installed_evidence():
    """(distribution, evidence) for each installed distribution that shows CUDA evidence."""
    import os

    from porting_cli.analysis.scan.libraries import distribution_evidence

    for entry in sys.path:
        try:
            infos = sorted(n for n in os.listdir(entry or ".") if n.endswith(".dist-info"))
        except OSError:
            continue
        for info in infos:
            found = distribution_evidence(os.path.join(entry or ".", info))
            if found:
                yield info.removesuffix(".dist-info"), found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=Path, default=DEFAULT_LIST, help="the PyPI package list (TSV)")
    parser.add_argument("--tsv", action="store_true", help="print a table instead of JSON lines")
    parser.add_argument("--installed", action="store_true", help="also inspect installed distributions")
    args = parser.parse_args(argv)
    if not args.packages.is_file():
        print(f"{args.packages}: no such package list", file=sys.stderr)
        return 2
    rows = sorted(census(args.packages))
    for rank, name, signal, summary in rows:
        if args.tsv:
            print(f"{rank}\t{name}\t{signal}\t{summary[:100]}")
        else:
            print(json.dumps({"rank": rank, "name": name, "signal": signal, "summary": summary}))
    print(f"# {len(rows)} ranked packages with a CUDA signal", file=sys.stderr)
    if args.installed:
        for name, found in installed_evidence():
            print(f"installed {name}: {'; '.join(found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
