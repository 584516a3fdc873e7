"""The rule table: every static rule as data.

A rule has an id (``NCfnn``: f is the family), a severity (how badly the code
breaks on a non-CUDA backend), an effort (how much manual work the port takes,
rated like SYCLomatic rates migration work: ``none`` = the fix is mechanical
and ``neuron-check --fix`` applies it, ``low`` / ``medium`` / ``high`` = a
person has to do more and more of it), a message naming the device-agnostic
replacement, and whether the rule can be fixed automatically (in some or all
of the places it fires; each finding says whether *it* is fixable).
"""

from __future__ import annotations

import dataclasses

SEVERITIES = ("info", "warning", "error")
EFFORTS = ("none", "low", "medium", "high")

#: The expression the fixes define once per module (see porting_cli.analysis.fix).
DEVICE_EXPR = 'torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    family: str
    name: str
    severity: str
    effort: str
    message: str
    fixable: bool = False
    #: the port needs new code (a kernel, a replacement for a library that has none); only
    #: these findings, and ops missing on the target, make the verdict `blocked`
    blocks: bool = False

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES or self.effort not in EFFORTS:
            raise ValueError(f"rule {self.id}: bad severity or effort")


_R = Rule

RULES: tuple[Rule, ...] = (
    # -- device placement ------------------------------------------------------
    _R("NC101", "device", "cuda-method", "error", "none",
       "`.cuda()` only moves to CUDA; use `.to(device)` with the current accelerator "
       f"(`device = {DEVICE_EXPR}`)", True),
    _R("NC102", "device", "cuda-device-string", "error", "none",
       "hard-coded \"cuda\" device; use the current accelerator "
       f"(`{DEVICE_EXPR}`, or its `.type` where a device type string is wanted)", True),
    _R("NC103", "device", "cuda-device-comparison", "warning", "none",
       "test for the \"cuda\" device type; test for the current accelerator's type "
       "(the fix compares with `DEVICE_TYPE`: the accelerator's type, \"cuda\" where there is none)",
       True),
    _R("NC104", "device", "integer-device", "error", "none",
       "a bare integer device means CUDA device N on torch before 2.5 (as on the installed torch); use "
       "`torch.device(device.type, N)` with the current accelerator", True),
    _R("NC105", "device", "cuda-tensor-type", "error", "low",
       "legacy `torch.cuda.*Tensor` type; create tensors with `torch.tensor(..., dtype=..., "
       "device=device)` on the current accelerator"),
    _R("NC106", "device", "device-index-expression", "error", "none",
       "an integer device index (from LOCAL_RANK/RANK, `mp.spawn`, `torch.cuda.current_device()` or "
       "a --gpu/--local_rank option) means CUDA device N on torch before 2.5 (as on the installed torch; "
       "`torch.cuda.current_device()` is a CUDA index on any torch); use `torch.device(DEVICE.type, index)`", True),
    _R("NC107", "device", "built-cuda-device-string", "error", "none",
       "device string built from \"cuda\"; build it from the current accelerator's type "
       "(`f\"{DEVICE.type}:{index}\"`)", True),
    _R("NC108", "device", "is-cuda-test", "warning", "none",
       "`.is_cuda` is False on other accelerators; test `x.device.type` against the current "
       "accelerator's type", True),
    _R("NC110", "device", "cuda-device-text", "warning", "low",
       "a device handled as text with \"cuda\" in it (`str(device).replace(\"cuda:\", \"\")`, "
       "`.startswith(\"cuda\")`); use `torch.device(x).type` / `.index`, which hold for any accelerator"),
    _R("NC111", "device", "integer-device-accelerator", "info", "none",
       "a bare integer device (a literal, or an index from LOCAL_RANK/RANK, `mp.spawn` or a --gpu/"
       "--local_rank option) is device N of the current accelerator from torch 2.5 on "
       "(pytorch/pytorch#129119), as on the installed torch: no change needed (like a CUDA device, it "
       "raises where there is no accelerator at all)"),
    _R("NC112", "device", "default-cuda-tensor-type", "error", "none",
       "`torch.set_default_tensor_type` is deprecated since torch 2.1 and a `torch.cuda.*Tensor` default "
       "raises without CUDA; use `torch.set_default_dtype(dtype)` and `torch.set_default_device(device)` "
       "with the current accelerator", True),
    _R("NC109", "device", "cuda-only-fused-optimizer", "info", "low",
       "the fused optimizer is chosen only on CUDA; keep `fused=True` on the backend only if it has "
       "the fused kernel (`aten._fused_adamw_`), else the default (foreach) implementation runs"),
    # -- torch.cuda APIs -------------------------------------------------------
    _R("NC201", "cuda-api", "cuda-is-available", "warning", "none",
       "`torch.cuda.is_available()` is False on other backends; use `torch.accelerator.is_available()`",
       True),
    _R("NC202", "cuda-api", "cuda-device-count", "warning", "none",
       "use `torch.accelerator.device_count()`", True),
    _R("NC203", "cuda-api", "cuda-current-device", "error", "none",
       "use `torch.accelerator.current_device_index()` (guarded by "
       "`torch.accelerator.is_available()`)", True),
    _R("NC204", "cuda-api", "cuda-set-device", "error", "none",
       "use `torch.accelerator.set_device_index(i)` (guarded by `torch.accelerator.is_available()`)",
       True),
    _R("NC205", "cuda-api", "cuda-synchronize", "error", "none",
       "use `torch.accelerator.synchronize()` (guarded by `torch.accelerator.is_available()`)", True),
    _R("NC206", "cuda-api", "cuda-empty-cache", "warning", "none",
       "`torch.cuda.empty_cache()` empties only CUDA's cache (off CUDA the script runs on, the "
       "accelerator's cache untouched); use `torch.accelerator.empty_cache()` (guarded by "
       "`torch.accelerator.is_available()`)", True),
    _R("NC207", "cuda-api", "cuda-memory-stats", "error", "none",
       "use the `torch.accelerator` memory API of the same name (guarded: without an accelerator, "
       "or where the backend's allocator keeps no statistics, the fix returns a default)", True),
    _R("NC208", "cuda-api", "cuda-manual-seed", "warning", "none",
       "CUDA seeding reaches CUDA's generators only (`torch.accelerator` has no seeding function); seed "
       "the current accelerator's generator: `torch.get_device_module(device).manual_seed_all(seed)` "
       "(guarded by `torch.accelerator.is_available()`), or `torch.manual_seed(seed)`, which seeds the "
       "CPU and every device module, a PrivateUse1 backend's included", True),
    _R("NC209", "cuda-api", "cuda-device-properties", "info", "low",
       "CUDA device properties have no device-agnostic equivalent; use "
       "`torch.accelerator.current_accelerator()` / `torch.accelerator.get_device_capability()`"),
    _R("NC210", "cuda-api", "cuda-device-context", "warning", "low",
       "use `torch.accelerator.device_index(i)` as the context manager "
       "(it raises without an accelerator)"),
    _R("NC211", "cuda-api", "cuda-nvtx", "info", "low",
       "NVTX ranges only mark CUDA timelines; use `torch.profiler.record_function(name)` or drop them"),
    _R("NC212", "cuda-api", "cuda-bf16-supported", "warning", "low",
       "ask the current accelerator's device module: "
       "`torch.get_device_module(device).is_bf16_supported()` where it exists", True),
    _R("NC213", "cuda-api", "cuda-version", "info", "low",
       "`torch.version.cuda` is None on other backends; test the accelerator "
       "(`torch.accelerator.current_accelerator()`) instead of the CUDA version"),
    _R("NC214", "cuda-api", "pin-memory", "info", "low",
       "pinned host memory needs the backend's host allocator; keep `pin_memory` only where "
       "the backend supports it (`pin_memory=torch.accelerator.is_available()` and check the target)"),
    _R("NC215", "cuda-api", "cuda-memory-other", "warning", "low",
       "CUDA memory API with no `torch.accelerator` equivalent; use "
       "`torch.accelerator.memory_stats()` / `memory_allocated()` or drop it"),
    _R("NC216", "cuda-api", "cuda-profiler-activity", "warning", "low",
       "`ProfilerActivity.CUDA` traces CUDA kernels only; use "
       "`torch.profiler.supported_activities()` (or the backend's activity, e.g. `PrivateUse1`)"),
    _R("NC299", "cuda-api", "cuda-other-api", "warning", "medium",
       "CUDA-only `torch.cuda` API; find the backend's equivalent through "
       "`torch.get_device_module(device)` or drop it"),
    # -- automatic mixed precision --------------------------------------------
    _R("NC301", "amp", "cuda-autocast", "warning", "none",
       "use `torch.amp.autocast(device.type, ...)` instead of `torch.cuda.amp.autocast(...)`", True),
    _R("NC302", "amp", "cuda-grad-scaler", "warning", "none",
       "use `torch.amp.GradScaler(device.type, ...)` instead of `torch.cuda.amp.GradScaler(...)`",
       True),
    _R("NC303", "amp", "cuda-amp-import", "warning", "none",
       "import from `torch.amp` instead of `torch.cuda.amp`", True),
    _R("NC304", "amp", "cuda-amp-other", "warning", "low",
       "use the `torch.amp` equivalent with an explicit `device_type` "
       "(e.g. `torch.amp.custom_fwd(device_type=device.type)`)"),
    _R("NC305", "amp", "apex-amp", "warning", "medium",
       "apex amp (`amp.initialize`, `amp.scale_loss`) is CUDA-only; use `torch.amp.autocast(device.type)` "
       "and `torch.amp.GradScaler(device.type)`"),
    _R("NC306", "amp", "cuda-amp-wrapper", "info", "low",
       "this class wraps the CUDA-only `torch.cuda.amp` API; port the class (its own findings), "
       "then its users need no change"),
    # -- cuDNN / TF32 flags ----------------------------------------------------
    _R("NC401", "backend-flags", "cudnn-flag", "info", "low",
       "cuDNN flag, ignored by other backends; for determinism use "
       "`torch.use_deterministic_algorithms(True)`"),
    _R("NC402", "backend-flags", "tf32-flag", "info", "low",
       "TF32 switch of CUDA; use `torch.set_float32_matmul_precision(\"high\")` "
       "(\"highest\" to disable)", True),
    _R("NC403", "backend-flags", "cuda-backend-flag", "warning", "low",
       "CUDA backend switch; use the device-agnostic API (e.g. "
       "`torch.nn.attention.sdpa_kernel(...)` for SDPA kernel choice)"),
    # -- distributed -----------------------------------------------------------
    _R("NC501", "distributed", "nccl-backend", "error", "medium",
       "NCCL only exists for CUDA; choose the backend with "
       "`torch.distributed.get_default_backend_for_device(device)`", True),
    _R("NC502", "distributed", "nccl-api", "warning", "medium",
       "NCCL-specific API; use the generic `torch.distributed` API"),
    _R("NC504", "distributed", "data-parallel", "warning", "medium",
       "`nn.DataParallel` splits batches over CUDA devices only; use DistributedDataParallel "
       "(one process per device) or one device"),
    _R("NC506", "distributed", "nccl-only-argument", "warning", "low",
       "an argument only the NCCL process group takes (`barrier(device_ids=...)`); leave it out on "
       "other backends (`dist.barrier()` synchronises every rank)"),
    _R("NC505", "distributed", "apex-parallel", "warning", "medium",
       "apex.parallel is CUDA-only; use `torch.nn.parallel.DistributedDataParallel` and "
       "`torch.nn.SyncBatchNorm`"),
    # -- streams, events, graphs -----------------------------------------------
    _R("NC601", "streams", "cuda-stream", "warning", "low",
       "use `torch.Stream(device)` instead of `torch.cuda.Stream()`", True),
    _R("NC602", "streams", "cuda-stream-context", "warning", "low",
       "use `with stream:` on a `torch.Stream`, `torch.accelerator.current_stream()` / "
       "`torch.accelerator.set_stream()`"),
    _R("NC603", "streams", "cuda-event", "warning", "low",
       "use `torch.Event(device, ...)` instead of `torch.cuda.Event(...)`"),
    _R("NC604", "streams", "cuda-graph", "warning", "high",
       "CUDA graphs are CUDA-only; use `torch.accelerator.Graph` where the backend supports "
       "it, or `torch.compile`"),
    # -- custom kernels and CUDA-only libraries ---------------------------------
    _R("NC701", "kernels", "cuda-extension", "error", "high",
       "custom CUDA extension; register the op with `torch.library` and give it a kernel for "
       "the backend (an NKI kernel on Trainium) plus a PyTorch reference implementation",
       blocks=True),
    _R("NC702", "kernels", "triton-kernel", "error", "high",
       "Triton kernel; runs only where the backend has a Triton compiler: write it with PyTorch "
       "ops (and `torch.compile`) or as a backend kernel (NKI on Trainium)", blocks=True),
    _R("NC703", "kernels", "cuda-only-library", "error", "medium",
       "CUDA-only library with a PyTorch replacement"),
    _R("NC704", "kernels", "cuda-only-library-no-replacement", "error", "high",
       "CUDA-only library with no PyTorch replacement: the port needs new code", blocks=True),
    _R("NC705", "kernels", "optional-cuda-library", "info", "low",
       "CUDA-only library imported with a fallback (`except ImportError`) or behind an availability guard "
       "(`is_x_available()`, `find_spec`, a flag they set); check that the fallback "
       "path is the one taken on the backend"),
    _R("NC706", "kernels", "cuda-evidence-library", "warning", "medium",
       "third-party library whose installed files tie it to CUDA (shared objects linking libcudart/"
       "libcuda/NCCL, Triton kernels, CUDA requirements) and that neuron-check's library data does "
       "not know (review): check that it has a path for the backend"),
    _R("NC707", "kernels", "cuda-library-api-name", "warning", "low",
       "an API of another package that needs a CUDA-only library (Lightning's `BitsandbytesPrecision`, "
       "Accelerate's `load_and_quantize_model`), named without being called (an import, a base class): "
       "the code that calls it is what needs the library"),
    # -- float64 ---------------------------------------------------------------
    _R("NC801", "dtype", "float64-dtype", "warning", "medium",
       "64-bit floating dtype; Trainium has no float64: use `torch.float32` "
       "(compute in float64 on CPU only where precision demands it)"),
    _R("NC802", "dtype", "double-method", "warning", "medium",
       "`.double()` converts to float64, which Trainium lacks; use `.float()`"),
    # -- Hugging Face ----------------------------------------------------------
    _R("NC901", "huggingface", "cuda-device-map", "error", "none",
       "`device_map` pinned to CUDA; pass the current accelerator device "
       "(or `device_map=\"auto\"`)", True),
    _R("NC902", "huggingface", "bitsandbytes-quantization", "error", "high",
       "bitsandbytes quantization (`load_in_8bit`/`load_in_4bit`, `BitsAndBytesConfig`) runs CUDA "
       "kernels with no PyTorch fallback: the port needs another quantization the backend supports "
       "(e.g. torchao, or the backend's own int8/fp8 path)", blocks=True),
    _R("NC905", "huggingface", "bitsandbytes-config-name", "warning", "low",
       "`BitsAndBytesConfig` named without building one (an import, an isinstance test): the "
       "bitsandbytes quantization it configures is CUDA-only; the code that builds one is the blocker"),
    _R("NC903", "huggingface", "flash-attention-2", "warning", "low",
       "`attn_implementation=\"flash_attention_2\"` needs the CUDA-only flash_attn package; use "
       "`\"sdpa\"` (PyTorch's scaled_dot_product_attention) on the backend (not fixed automatically: "
       "on CUDA the fixed script must keep running the kernels it ran)"),
    _R("NC904", "huggingface", "cuda-training-option", "warning", "low",
       "a training option that assumes CUDA (`fp16` mixed precision with a CUDA grad scaler, `tf32`, "
       "a bitsandbytes/apex/fused `optim`, `half_precision_backend`); use `bf16` / the default "
       "`adamw_torch` optimizer, or check that the backend supports it"),
    # -- training frameworks (Lightning, DeepSpeed configs) ---------------------
    _R("NC921", "frameworks", "lightning-cuda-accelerator", "error", "none",
       "Lightning's `accelerator=\"gpu\"` / `\"cuda\"` means CUDA (or MPS) and stops the run on any other "
       "backend; use `accelerator=\"auto\"` (or the backend's registered accelerator)", True),
    _R("NC922", "frameworks", "lightning-gpus-argument", "error", "low",
       "`gpus=` was removed in Lightning 2.0 (the Trainer rejects it) and meant CUDA devices; use "
       "`accelerator=\"auto\", devices=N`"),
    _R("NC923", "frameworks", "lightning-device-indices", "info", "low",
       "Lightning `devices=` as a list of indices: indices of the chosen accelerator's devices (CUDA "
       "ones with `accelerator=\"gpu\"`); check the backend has them, or give a count / `\"auto\"`"),
    _R("NC925", "frameworks", "lightning-mixed-precision", "info", "low",
       "Lightning mixed / half precision (`\"16-mixed\"`, `\"bf16-mixed\"`, `16`): autocast on the accelerator "
       "in that dtype; check the backend supports it (bf16 where float16 is not)"),
    _R("NC926", "frameworks", "deepspeed-cuda-config", "info", "low",
       "a DeepSpeed config entry that assumes what CUDA offers (a float16 loss scaler, a collectives "
       "dtype); check that the backend's DeepSpeed accelerator supports it"),
    # -- environment -----------------------------------------------------------
    _R("NC911", "environment", "cuda-visible-devices", "warning", "low",
       "`CUDA_VISIBLE_DEVICES` is read by CUDA only; use the backend's variable "
       "(`NEURON_RT_VISIBLE_CORES` on Trainium, `ZE_AFFINITY_MASK` on XPU)"),
    _R("NC912", "environment", "cuda-env-var", "info", "low",
       "CUDA/NCCL environment variable; it has no effect on other backends"),
    # -- the safety net --------------------------------------------------------
    _R("NC999", "net", "cuda-reference", "warning", "low",
       "CUDA-specific reference (review): code that names CUDA and that no specific rule "
       "explained; make it device-agnostic or confirm it is not taken on the backend"),
)

RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}


def rules_markdown() -> str:
    """The rule table as a Markdown table (for the README and `--list-rules`)."""
    rows = ["| id | family | severity | effort | auto-fix | what to use instead |",
            "|---|---|---|---|---|---|"]
    for r in RULES:
        msg = r.message.replace("|", "\\|")
        rows.append(f"| {r.id} | {r.family} | {r.severity} | {r.effort} | "
                    f"{'yes' if r.fixable else 'no'} | {msg} |")
    return "\n".join(rows) + "\n"


def prelude_names(device_name: str) -> dict[str, str]:
    """The names the prelude of a fixed file binds, derived from the device's name."""
    low = device_name.lower()
    return {"device": device_name, "type": f"{device_name}_TYPE", "device_for": f"{low}_for",
            "bf16": f"{low}_supports_bf16", "memory": f"{low}_memory"}
