"""Recall that holds on code nobody tuned for (issue 30): the NC999 safety net, prose never
reported, findings at the CUDA token, fixes that always parse, availability guards."""

from __future__ import annotations

import ast

import pytest

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan import scan_source
from porting_cli.analysis.scan.checked import syntax_problem
from porting_cli.analysis.scan.engine import analyze_cached


def rules_by_line(source: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for f in scan_source(source).findings:
        out.setdefault(f.line, []).append(f.rule_id)
    return out


# -- the safety net: every line that holds CUDA code is reported ----------------------------
NET_CASES = [
    ("use_cuda = torch.cuda.is_available()\nif use_cuda:\n    pass\n", 2, "use_cuda"),
    ("def initialize(args, allow_no_cuda=False):\n    pass\n", 1, "allow_no_cuda"),
    ("mpu.model_parallel_cuda_manual_seed(seed)\n", 1, "model_parallel_cuda_manual_seed"),
    ("code = ErrorCode.CUDA_OUT_OF_MEMORY\n", 1, "CUDA_OUT_OF_MEMORY"),
    ("if dist.get_backend() == dist.Backend.NCCL:\n    pass\n", 1, "NCCL"),
    ("def median_filter_cuda(x, width):\n    return x\n", 1, "median_filter_cuda"),
    ("class Args:\n    cuda: bool = True\n", 2, "cuda"),
    ("train(model, use_cuda=flag)\n", 1, "use_cuda"),
    ('table = {"cuda": 1}\n', 1, "cuda"),
    ('parser.add_argument("--cuda", action="store_true", help="use the GPU")\n', 1, "--cuda"),
    ("import nvtx\n", 1, "nvtx"),
    ("import torch.backends.cudnn as cudnn\n", 1, "cudnn"),
    ('name = f"cuda:{rank}" if ok else "cpu"\nprint(name)\n', 1, "cuda:"),
    ('out = subprocess.check_output(["nvidia-smi", "-L"])\n', 1, "nvidia-smi"),
]


@pytest.mark.parametrize("source, line, token", NET_CASES)
def test_a_cuda_token_no_rule_explains_is_caught_by_the_net_at_its_column(source, line, token):
    found = [f for f in scan_source(source).findings if f.line == line]
    assert found, f"line {line} of {source!r} went unreported"
    if found[0].rule_id == "NC999":
        text = source.splitlines()[line - 1]
        assert found[0].col == text.index(token) + 1 and token in found[0].message
        assert (found[0].fixable, found[0].effort) == (False, "low")


PROSE = [
    'print("moving the model to cuda")\n',
    'print("cuda")\n',
    'logger.info("cuda:0 is used")\n',
    'logger.info(f"use_cuda={use_cuda}")\n',
    'warnings.warn("nccl")\n',
    'parser.add_argument("--fast", help="cuda")\n',
    'raise RuntimeError("cuda")\n',
    'assert ok, "cuda"\n',
    'def f():\n    """Runs on cuda and nccl."""\n    return 1\n',
    '"""cuda"""\n',
    'doc = """torch.cuda.synchronize()"""\n',
    "# x = x.cuda()\n",
    "occupy = 1\nbarracuda = 2\n",
    'print("run nvidia-smi to see the GPUs")\n',
    'msg = f"cuda:{rank} is out of memory"\n',
]


@pytest.mark.parametrize("source", PROSE)
def test_prose_and_look_alike_words_are_never_reported(source):
    assert scan_source(source).findings == []


def test_a_line_with_a_finding_gets_no_second_net_finding():
    assert rules_by_line("use_cuda = x.cuda()\n") == {1: ["NC101"]}


# -- positions: the finding is at the CUDA token ---------------------------------------------
def test_cuda_method_at_the_end_of_a_long_call_is_reported_on_its_own_line():
    source = "loss = DINOLoss(\n    out_dim,\n    ncrops,\n    warmup,\n).cuda()\n"
    (f,) = scan_source(source).findings
    assert (f.rule_id, f.line, f.col, f.end_line) == ("NC101", 5, 3, 5)
    fixed = fix_source(source)
    assert ").to(DEVICE)" in fixed.new_text


# -- fixes are never invalid ---------------------------------------------------------------
def test_a_name_being_bound_is_never_rewritten():
    source = "import torch\nclass L:\n    def __init__(self, device):\n" \
             "        self.is_cuda = device.type == 'cuda' and torch.cuda.is_available()\n"
    result = fix_source(source)
    assert "self.is_cuda = device.type == DEVICE_TYPE and torch.accelerator.is_available()" in result.new_text
    target = [f for f in result.remaining if f.rule_id == "NC108"]
    assert target and "binds this name" in target[0].message


@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_fix_inside_an_f_string_uses_the_other_quote(quote):
    source = (f"import torch\nmem = f{quote}{{torch.cuda.memory_reserved() / 1e9:.3g}}G{quote}\n")
    result = fix_source(source)
    assert syntax_problem(result.new_text) is None
    other = "'" if quote == '"' else '"'
    assert f"device_memory({other}memory_reserved{other}, 0)" in result.new_text
    assert not [f for f in scan_source(result.new_text).findings if f.fixable]


def test_newer_grammar_is_a_syntax_problem_for_python_3_10():
    assert syntax_problem("try:\n    pass\nexcept* ValueError:\n    pass\n") is not None
    assert syntax_problem("x = 1\n") is None


def test_a_fix_that_does_not_parse_is_dropped_and_its_finding_says_why():
    """Inject a broken edit into the analysis: the fix offered must leave it out, the finding
    stays with the reason, and the other fixes of the file are still made."""
    source = "import torch\ntorch.cuda.synchronize()\ny = x.cuda()\n"
    analysis = analyze_cached(source, "<inject>")
    key, (node, _) = next((k, v) for k, v in analysis.ctx.edits.items() if isinstance(v[0], ast.Call)
                          and getattr(v[0].func, "attr", "") == "cuda")
    analysis.ctx.edits[key] = (node, lambda view: "x.to(DEVICE")  # unbalanced: cannot parse
    result = fix_source(source, "<inject>")
    assert syntax_problem(result.new_text) is None
    (kept,) = [f for f in result.remaining if f.rule_id == "NC101"]
    assert "would not parse on Python 3.10" in kept.message
    assert "torch.accelerator.synchronize()" in result.new_text and "x.cuda()" in result.new_text


# -- availability guards make an import optional -------------------------------------------
GUARDED = [
    "if is_bnb_available():\n    import bitsandbytes as bnb\n",
    "import importlib.util\nif importlib.util.find_spec('flash_attn') is not None:\n    import flash_attn\n",
    "try:\n    import apex\n    HAS_APEX = True\nexcept ImportError:\n    HAS_APEX = False\n"
    "if HAS_APEX:\n    from apex.optimizers import FusedAdam\n",
    "def load():\n    if not is_bnb_available():\n        raise ImportError('bitsandbytes')\n"
    "    import bitsandbytes\n",
    "_flash = is_flash_attn_2_available()\nif _flash:\n    from flash_attn import flash_attn_func\n",
    # a helper the guarded entry point calls: the file checks the package, the import is in a function
    "def load(m):\n    if not is_4bit_bnb_available():\n        raise ImportError('bitsandbytes')\n    return _swap(m)\n"
    "def _swap(m):\n    import bitsandbytes as bnb\n    return bnb.nn.Linear8bitLt(1, 2)\n",
    "@require_bnb\ndef test_int8():\n    import bitsandbytes\n",
    "import pytest\nbnb = pytest.importorskip('bitsandbytes')\ndef f():\n    import bitsandbytes\n",
]


@pytest.mark.parametrize("source", GUARDED)
def test_an_import_behind_an_availability_guard_is_optional_not_a_blocker(source):
    libraries = [f.rule_id for f in scan_source(source).findings if f.family == "kernels"]
    assert libraries and set(libraries) == {"NC705"}


@pytest.mark.parametrize("handler", ["    raise ImportError('pip install bitsandbytes')\n",
                                     "    print('install bitsandbytes')\n    sys.exit(1)\n"])
def test_an_import_whose_except_import_error_raises_again_is_no_fallback(handler):
    source = f"import sys\ntry:\n    import bitsandbytes as bnb\nexcept ImportError:\n{handler}"
    assert [f.rule_id for f in scan_source(source).findings] == ["NC704"]


def test_an_unguarded_import_of_a_cuda_only_library_still_blocks():
    assert [f.rule_id for f in scan_source("import bitsandbytes as bnb\n").findings] == ["NC704"]


# -- CUDA-only libraries: the data, the uses, the installed evidence --------------------------
def test_uses_of_names_a_cuda_only_library_bound_are_reported_like_its_import():
    source = ("import xformers.ops\nfrom flash_attn import flash_attn_func\n"
              "out = xformers.ops.memory_efficient_attention(q, k, v)\ny = flash_attn_func(q, k, v)\n")
    assert rules_by_line(source) == {1: ["NC703"], 2: ["NC703"], 3: ["NC703"], 4: ["NC703"]}


def test_a_library_the_data_classes_as_blocking_makes_the_port_blocked():
    found = scan_source("from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel\n").findings
    assert [f.rule_id for f in found] == ["NC704"] and "census" not in found[0].message


def test_a_package_with_a_cpu_path_is_never_reported():
    assert scan_source("import deepspeed\nimport accelerate\nimport numba\n").findings == []


def test_triton_kernel_launches_are_reported_and_kernel_bodies_are_one_change():
    source = ("import triton\nimport triton.language as tl\n@triton.jit\n"
              "def add(x_ptr, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n"
              "def build():\n    return triton.JITFunction(add.fn)\n"
              "def run(x):\n    kernel = build()\n    kernel[(4,)](x)\n    add[(1,)](x)\n    layers[0](x)\n")
    assert rules_by_line(source) == {1: ["NC702"], 2: ["NC702"], 3: ["NC702"], 7: ["NC702"],
                                     10: ["NC702"], 11: ["NC702"]}


def _fake_installed(tmp_path, name, requires=(), kernel=False):
    site = tmp_path / "site-packages"
    package = site / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    files = [f"{name}/__init__.py,,"]
    if kernel:
        (package / "triton_kernels.py").write_text("import triton\n@triton.jit\ndef k(x):\n    pass\n")
        files.append(f"{name}/triton_kernels.py,,")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("\n".join(files) + "\n")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires) + "\nbody\n")
    return site


@pytest.fixture
def installed(tmp_path, monkeypatch):
    from porting_cli.analysis.scan import libraries

    def install(name, **kwargs):
        monkeypatch.syspath_prepend(str(_fake_installed(tmp_path, name, **kwargs)))
        libraries.installed_evidence.cache_clear()
        libraries._evidence_of.cache_clear()
    yield install
    libraries.installed_evidence.cache_clear()
    libraries._evidence_of.cache_clear()


def test_an_unknown_installed_package_with_cuda_evidence_is_flagged_for_review(installed):
    installed("fastkernelz", requires=["nvidia-cuda-runtime-cu12>=12.1", "numpy"], kernel=True)
    installed("plainpkgz", requires=["numpy"])
    source = "import fastkernelz\nimport plainpkgz\ntry:\n    import fastkernelz as fk\nexcept ImportError:\n    fk = None\n"
    found = {f.line: f for f in scan_source(source, "evidence.py").findings}
    assert sorted(found) == [1, 4]
    assert found[1].rule_id == "NC706" and "requires nvidia-cuda-runtime-cu12>=12.1" in found[1].message
    assert "Triton kernels in fastkernelz/triton_kernels.py" in found[1].message
    assert found[4].rule_id == "NC705"  # behind try/except ImportError: optional


def test_an_installed_known_library_names_the_evidence_that_decided(installed):
    installed("xformers", requires=["torch", "triton>=2.1"])
    (f,) = scan_source("import xformers\n", "known.py").findings
    assert f.rule_id == "NC703" and "installed: requires triton>=2.1" in f.message


# -- aliases and values the code binds --------------------------------------------------------
ALIASES = [
    # (source, line, rule)
    ("from torch import autocast\nfrom contextlib import nullcontext\n"
     "scope = autocast if fast else nullcontext\nwith scope(\"cuda\"):\n    pass\n", 4, "NC102"),
    ("import torch as th\nd = th.device(f\"cuda\")\n", 2, "NC102"),
    ("import torch\nd = torch.device(\"cuda:%d\" % 1)\n", 2, "NC102"),
    ("import functools\nimport torch\nctx = functools.partial(torch.autocast, dtype=torch.bfloat16)\n"
     "with ctx(\"cuda\"):\n    pass\n", 4, "NC102"),
    ("import torch\ndef get_scaler():\n    return torch.cuda.amp.GradScaler\ncls = get_scaler()\nscaler = cls()\n",
     5, "NC302"),
    ("import torch\ndef step(sync=torch.cuda.synchronize):\n    sync()\n", 3, "NC205"),
    # a partial of another functional library, bound in one branch; the other defines a no-op
    ("import contextlib\nimport funcy\nimport torch\nif torch.cuda.is_available():\n"
     "    autocast = funcy.partial(torch.cuda.amp.autocast, dtype=torch.bfloat16)\nelse:\n"
     "    @contextlib.contextmanager\n    def autocast():\n        yield\n"
     "def run():\n    with torch.no_grad(), autocast():\n        pass\n", 11, "NC301"),
    ("import torch as th\nth.cuda.empty_cache()\n", 2, "NC206"),
    ("import torch\nclass T:\n    def __init__(self):\n        self.autocast = torch.cuda.amp.autocast\n"
     "    def step(self):\n        with self.autocast():\n            pass\n", 6, "NC301"),
]


@pytest.mark.parametrize("source, line, rule", ALIASES)
def test_apis_reached_through_names_the_code_binds_are_found(source, line, rule):
    assert rule in rules_by_line(source).get(line, [])
    fixed = fix_source(source)
    assert syntax_problem(fixed.new_text) is None
    assert not [f for f in scan_source(fixed.new_text).findings if f.fixable]


def test_a_call_through_a_bound_name_is_not_rewritten():
    """`sync()` may be given another function: only the default is CUDA's, so the call stays."""
    source = "import torch\ndef step(sync=torch.cuda.synchronize):\n    sync()\n"
    result = fix_source(source)
    assert "    sync()\n" in result.new_text
    (through,) = [f for f in result.remaining if f.line == 3]
    assert "a name the code binds" in through.message


def test_the_target_of_an_assignment_is_no_use_of_the_api():
    source = "import torch\ndef get():\n    return torch.cuda.amp.GradScaler\nscaler_cls = get()\n"
    assert 4 not in rules_by_line(source)


def test_bitsandbytes_through_hugging_face_behind_a_guard_is_optional():
    source = ("def load(p):\n    if is_bitsandbytes_available():\n"
              "        return AutoModel.from_pretrained(p, load_in_8bit=True)\n")
    assert [f.rule_id for f in scan_source(source).findings] == ["NC705"]


def test_a_device_index_from_the_cuda_api_is_fixed_in_one_pass():
    """`device=torch.cuda.current_device()` carries two findings on one node (an index used as
    a device, a torch.cuda call); one edit must do both, or a second --fix finds more to fix."""
    source = "import torch\nx = torch.zeros(2, device=torch.cuda.current_device())\n"
    fixed = fix_source(source).new_text
    assert "torch.cuda" not in fixed
    assert not [f for f in scan_source(fixed).findings if f.fixable]


def test_an_attribute_bound_to_an_api_is_reported_where_used_not_where_bound():
    source = ("import torch\nclass T:\n    def __init__(self):\n        self.sync = torch.cuda.synchronize\n"
              "    def step(self):\n        self.sync()\n")
    found = [(f.rule_id, f.line, f.col, f.fixable) for f in scan_source(source).findings]
    assert found == [("NC205", 4, 21, False), ("NC205", 6, 9, False)]


def test_naming_bitsandbytes_config_does_not_block_building_one_does():
    from porting_cli.analysis.scan import RULES_BY_ID

    imported = scan_source("from transformers import (\n    AutoModel,\n    BitsAndBytesConfig,\n)\n").findings
    assert [(f.rule_id, f.line) for f in imported] == [("NC905", 3)] and not RULES_BY_ID["NC905"].blocks
    built = scan_source("from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)\n")
    assert [f.rule_id for f in built.findings] == ["NC905", "NC902", "NC902"] and RULES_BY_ID["NC902"].blocks


def test_launches_of_imported_and_wrapped_kernels_are_reported_and_tables_of_functions_are_not():
    source = ("import torch\nfrom .ops import add_kernel\nfrom . import ops\n"
              "from transformers.activations import ACT2FN\n"
              "def run(x, n, name):\n"
              "    grid = (n,)\n"
              "    add_kernel[grid](x)\n"
              "    ops.mul_kernel[lambda meta: (n,)](x)\n"
              "    torch.library.wrap_triton(add_kernel)[grid](x)\n"
              "    y = ACT2FN[name](x)\n"
              "    return HANDLERS[(name, n)](y)\n")
    # A kernel another module defines is reported for review (that module may fall back), one
    # this file wraps needs Triton here.
    assert rules_by_line(source) == {7: ["NC999"], 8: ["NC999"], 9: ["NC702"]}
