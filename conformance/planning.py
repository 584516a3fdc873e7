"""What every suite's planning shares: dtype names, shards, and the `ops` command's options.

Each suite plans its own items (conformance/suite.py, `Suite.plan`); the OpInfo and FP8
suites are both planned from one `OpsOptions`, since `neuron-check ops` runs them both.
"""

from __future__ import annotations

import dataclasses
import zlib

from conformance.suite import cli_option
from op_db.errors import InputError
from op_db.records import WorkItem, parse_rounding

DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16",
    "bf16": "bfloat16", "fp64": "float64", "double": "float64", "int": "int32", "long": "int64",
    "cfloat": "complex64", "cdouble": "complex128", "bool": "bool",
}
DEFAULT_DTYPES = ("float32", "bfloat16", "float16")
FP8 = "fp8"
MODES = ("eager", "compile")


def parse_dtypes(names: list[str] | None) -> list[str]:
    """['fp32', 'torch.bfloat16', 'fp8'] -> ['float32', 'bfloat16', 'fp8'] (order kept, no repeats)."""
    import torch

    if not names:
        return list(DEFAULT_DTYPES)
    found: list[str] = []
    for raw in names:
        name = raw.strip().lower().removeprefix("torch.")
        if name == FP8 or name.startswith("float8"):
            canonical = FP8 if name == FP8 else name
        else:
            name = DTYPE_ALIASES.get(name, name)
            value = getattr(torch, name, None)
            if not isinstance(value, torch.dtype):
                raise InputError(
                    f"unknown dtype {raw!r}; use fp32, bf16, fp16, fp8 or a torch dtype name such as float64."
                )
            canonical = str(value).removeprefix("torch.")
        if canonical not in found:
            found.append(canonical)
    return found


def parse_modes(modes) -> tuple[str, ...]:
    """('eager', 'compile') from a comma list or tuple; order kept, no repeats, eager by default."""
    names = modes.split(",") if isinstance(modes, str) else list(modes or ())
    found: list[str] = []
    for name in (n.strip() for n in names):
        if name not in MODES:
            raise InputError(f"unknown mode {name!r}; use eager, compile or eager,compile.")
        if name not in found:
            found.append(name)
    return tuple(found) or ("eager",)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'2/4' -> (2, 4); None stays None."""
    if not text:
        return None
    k, sep, n = text.partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit() or not 1 <= int(k) <= int(n):
        raise InputError(f"--shard must be K/N with 1 <= K <= N, for example 1/4, not {text!r}.")
    return int(k), int(n)


def in_shard(item: WorkItem, shard: tuple[int, int] | None) -> bool:
    """Stable split: an item's shard depends only on its own name, never on the rest of the plan."""
    if shard is None:
        return True
    k, n = shard
    return zlib.crc32(item.test_id.encode()) % n == k - 1


def is_fp8(dtype: str) -> bool:
    """'fp8' and the float8_* names: the FP8 suite's dtypes."""
    return dtype == FP8 or dtype.startswith("float8")


@dataclasses.dataclass(frozen=True)
class OpsOptions:
    """What `neuron-check ops` selects and how its items run; stored with the run so `--resume`
    rebuilds the plan. Each field's CLI option is declared with it (conformance/suite.py)."""

    ops: tuple[str, ...] = cli_option((), "--ops", "Comma list of OpInfo full names (mul, nn.functional.relu, "
                                      "normal.in_place) and globs ('nn.functional.*'). Default: every op.", kind="list")
    exclude: tuple[str, ...] = cli_option((), "--exclude", "Comma list of names or globs to leave out.", kind="list",
                                          empty_ok=True)
    dtypes: tuple[str, ...] = cli_option(DEFAULT_DTYPES, "--dtype", "Comma list: fp32, bf16, fp16, fp8 (the FP8 "
                                         "suite) or torch dtype names.", kind="list", show_default=True)
    grad: bool = cli_option(False, "--grad", "Also check gradients (the backward variant).", kind="flag")
    modes: tuple[str, ...] = cli_option(("eager",), "--mode", "Comma list: eager, compile (through torch.compile "
                                        "with the backend's compiler; eager on the device is a second reference).",
                                        kind="list", show_default=True)
    shard: str | None = cli_option(None, "--shard", "Run only shard K of N (K/N); shards split the plan deterministically.")
    max_samples: int | None = cli_option(None, "--max-samples", "At most N samples per item.", kind="count")
    reference_inputs: bool = cli_option(False, "--reference-inputs", "Use OpInfo's larger reference_inputs instead of "
                                        "sample_inputs.", kind="flag")
    # None: any rounding but toward-zero and double-rounding passes (conformance/numerics/ulp.py).
    expect_rounding: str | None = cli_option(None, "--expect-rounding", "The rounding the device must show where "
                                             "the CPU rounds to nearest even: nearest-even, toward-zero, stochastic "
                                             "or double-rounding. Default: anything but toward-zero and "
                                             "double-rounding.")

    def __post_init__(self) -> None:
        # Canonical dtype names (fp32 -> float32), so the stored options and every plan agree.
        object.__setattr__(self, "dtypes", tuple(parse_dtypes(list(self.dtypes))))
        object.__setattr__(self, "modes", parse_modes(self.modes))
        parse_shard(self.shard)
        if self.expect_rounding is not None:
            object.__setattr__(self, "expect_rounding", parse_rounding(self.expect_rounding))
