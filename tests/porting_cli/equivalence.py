"""Equivalence harness: does a fixed script do on CUDA what the original does?

`record(script)` runs a script in a child process on a pretend 2-GPU CUDA machine: the
`torch.cuda` and `torch.accelerator` APIs answer as CUDA would (2 devices, a current device
that `set_device` / `set_device_index` change), while every device placement (`.cuda()`,
`.to(...)`, `device=` of factories), autocast region, grad scaler, seed and synchronisation
is *recorded* as an event and executed on the CPU. The events of the original and of the
fixed script must be the same sequence: same placements (normalised to `cuda:N`), same
autocast device type / dtype / enabled, same dtypes of the placed tensors, same seeds.

With `real=True` and a machine that has CUDA, the script runs unpatched and only the
recording wrappers are installed, so the same comparison runs for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RECORDER = r'''
import contextlib, json, runpy, sys
import torch

EVENTS = []
REAL = sys.argv[2] == "real"
state = {"device": 0}


def norm(device):
    """A device argument as CUDA reads it: 'cuda:N', 'cpu', or None when it is not a device."""
    if device is None:
        return None
    if isinstance(device, bool):
        return None
    if isinstance(device, int):
        return f"cuda:{device}"
    if isinstance(device, (str, torch.device)):
        try:
            d = torch.device(device)
        except (RuntimeError, TypeError):
            return None
        if d.type == "cuda":
            return f"cuda:{state['device'] if d.index is None else d.index}"
        return d.type
    return None


def place(kind, obj, device):
    dtype = getattr(obj, "dtype", None)
    EVENTS.append(["place", kind, device, str(dtype) if dtype is not None else None])


@contextlib.contextmanager
def outermost():
    """Placements made inside another one (Module.to moving its parameters) are not events."""
    state["depth"] = state.get("depth", 0) + 1
    try:
        yield state["depth"] == 1
    finally:
        state["depth"] -= 1


def split_to(args, kwargs):
    """The device of a .to(...) call and the call's arguments with the device made CPU."""
    args, kwargs = list(args), dict(kwargs)
    if "device" in kwargs:
        device = norm(kwargs["device"])
        if device is not None and not REAL:
            kwargs["device"] = "cpu"
        return device, args, kwargs
    if args and not isinstance(args[0], (torch.dtype, torch.Tensor)):
        device = norm(args[0])
        if device is not None and not REAL:
            args[0] = "cpu"
        return device, args, kwargs
    return None, args, kwargs


for cls in (torch.Tensor, torch.nn.Module):
    original_to = cls.to

    def to(self, *args, _original=original_to, _kind=cls.__name__, **kwargs):
        device, args, kwargs = split_to(args, kwargs)
        with outermost() as first:
            result = _original(self, *args, **kwargs)
        if device is not None and first:
            place(_kind, result if isinstance(result, torch.Tensor) else self, device)
        return result
    cls.to = to

    original_cuda = cls.cuda

    def cuda(self, device=None, non_blocking=False, *, _original=original_cuda, _kind=cls.__name__, **kw):
        with outermost() as first:
            if first:
                place(_kind, self, norm("cuda" if device is None else device))
            return _original(self, device) if REAL else self
    cls.cuda = cuda

FACTORIES = ("zeros", "ones", "empty", "randn", "rand", "tensor", "arange", "full", "randint", "zeros_like")
for name in FACTORIES:
    original = getattr(torch, name)

    def factory(*args, _original=original, _name=name, **kwargs):
        device = norm(kwargs.get("device"))
        if device is not None and not REAL:
            kwargs["device"] = "cpu"
        result = _original(*args, **kwargs)
        if device is not None:
            place(_name, result, device)
        return result
    setattr(torch, name, factory)


def default_dtype(device_type, dtype):
    if dtype is not None:
        return str(dtype)
    return "torch.float16" if device_type == "cuda" else "torch.bfloat16"


def autocast(device_type=None, dtype=None, enabled=True, cache_enabled=None):
    EVENTS.append(["autocast", device_type, default_dtype(device_type, dtype), bool(enabled)])
    return contextlib.nullcontext()


def cuda_autocast(enabled=True, dtype=torch.float16, cache_enabled=True):
    return autocast("cuda", dtype, enabled)


class Scaler:
    def __init__(self, device="cuda", init_scale=65536.0, *args, enabled=True, **kwargs):
        EVENTS.append(["grad_scaler", device, float(init_scale), bool(enabled)])

    def scale(self, value):
        return value

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def update(self, *args):
        pass

    def unscale_(self, optimizer):
        pass


def cuda_scaler(init_scale=65536.0, *args, enabled=True, **kwargs):
    return Scaler("cuda", init_scale, enabled=enabled)


def set_device(device):
    index = device if isinstance(device, int) else torch.device(device).index
    EVENTS.append(["set_device", index])
    state["device"] = index


def seeded(name):
    def seed(value):
        EVENTS.append(["seed", name, int(value)])
    return seed


real_manual_seed = torch.manual_seed


def manual_seed(value):
    EVENTS.append(["seed", "all", int(value)])
    return real_manual_seed(value)


def event(name, value=None):
    def call(*args, **kwargs):
        EVENTS.append([name])
        return value
    return call


torch.manual_seed = manual_seed
torch.autocast = torch.amp.autocast = autocast
torch.cuda.amp.autocast = cuda_autocast
torch.amp.GradScaler = Scaler
torch.cuda.amp.GradScaler = cuda_scaler
if not REAL:
    cuda_device = torch.device("cuda")
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 2
    torch.cuda.current_device = lambda: state["device"]
    torch.cuda.set_device = set_device
    torch.cuda.synchronize = event("synchronize")
    torch.cuda.empty_cache = event("empty_cache")
    torch.cuda.manual_seed = seeded("cuda")
    torch.cuda.manual_seed_all = seeded("cuda-all")
    torch.cuda.is_bf16_supported = lambda including_emulation=True: True
    torch.cuda.max_memory_allocated = torch.cuda.memory_allocated = lambda *a, **k: 0
    torch.cuda.reset_peak_memory_stats = event("reset_peak_memory_stats")
    torch.accelerator.is_available = lambda: True
    torch.accelerator.current_accelerator = lambda check_available=False: cuda_device
    torch.accelerator.device_count = lambda: 2
    torch.accelerator.current_device_index = lambda: state["device"]
    torch.accelerator.set_device_index = set_device
    torch.accelerator.synchronize = event("synchronize")
    torch.accelerator.empty_cache = event("empty_cache")
    torch.accelerator.max_memory_allocated = torch.accelerator.memory_allocated = lambda *a, **k: 0
    torch.accelerator.reset_peak_memory_stats = event("reset_peak_memory_stats")
    real_device_module = torch.get_device_module
    torch.get_device_module = lambda device=None: torch.cuda if norm(device or "cuda").startswith("cuda") \
        else real_device_module(device)

script = sys.argv[1]
sys.argv = [script]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    print("EVENTS " + json.dumps(EVENTS))
'''


def record(script: str | Path, real: bool = False, timeout: float = 120) -> list[list]:
    """The device events of ``script`` on the pretend (or, with ``real``, the actual) CUDA machine."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "") if real else ""}
    script = Path(script).resolve()
    out = subprocess.run([sys.executable, "-c", RECORDER, str(script), "real" if real else "fake"],
                         capture_output=True, text=True, timeout=timeout, env=env, cwd=Path(script).parent)
    lines = [line for line in out.stdout.splitlines() if line.startswith("EVENTS ")]
    if out.returncode != 0 or not lines:
        raise AssertionError(f"{script} failed under the recorder:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("EVENTS "):])
