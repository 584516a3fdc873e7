"""Every calling form of autocast a CUDA script uses; each region must run on the target."""
import functools
from contextlib import nullcontext

import torch

x = torch.randn(8, 8, device="cuda")
w = torch.randn(8, 8, device="cuda")

with torch.autocast(device_type="cuda", dtype=torch.bfloat16):  # MARK: keyword
    y = x @ w  # MARK: keyword_mm
print("keyword", y.dtype)

with torch.amp.autocast("cuda"):  # MARK: amp_positional
    y = x @ w
print("amp", y.dtype)

with torch.cuda.amp.autocast(enabled=True, dtype=torch.bfloat16):  # MARK: cuda_amp
    y = x @ w
print("cuda_amp", y.dtype)

with torch.cuda.amp.autocast(enabled=False):  # MARK: cuda_amp_off
    y = x @ w
print("cuda_amp_off", y.dtype)

bf16 = functools.partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16)
with bf16():  # MARK: partial
    y = x @ w
print("partial", y.dtype)

device_type = "cuda" if torch.cuda.is_available() else "cpu"
ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type, dtype=torch.bfloat16)  # MARK: nullcontext
with ctx:
    y = x @ w
print("nullcontext", y.dtype)
