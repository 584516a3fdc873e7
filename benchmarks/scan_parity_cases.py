"""Layouts that a tree printer and a text splice could treat differently (for scan_parity.py)."""

EDGE_CASES = {
    "parenthesised": 'import torch\ny = y.to(("cuda"))\nx.cuda((rank))\ntorch.cuda.set_device((0))\n'
                     'z = (torch.cuda.current_device())\nw = [("cuda")]\n',
    "multiline-call": "import os, torch\nrank = int(os.environ['LOCAL_RANK'])\nx = x.cuda(\n    rank,\n"
                      "    non_blocking=True,\n)\ny = y.cuda(\n    non_blocking=True\n)\nz = z.cuda( )\n",
    "multiline-guard": "import torch\ndef f(seed):\n    torch.cuda.manual_seed_all(\n        seed)\n"
                       "    torch.cuda.synchronize(\n    )  # done\n",
    "non-ascii": 'import torch\ns = "é"; x = x.to("cuda")\nprint("héllo", torch.cuda.is_available())\n'
                 'données = données.cuda()\nt = "ü" + "cuda"\nq = {"é": torch.cuda.memory_allocated()}\n',
    "glued-strings": 'import os, torch\nos.environ["NCCL_" "DEBUG"] = "1"\ndist.init_process_group("nc" "cl")\n'
                     'x.to("cu" "da")\nx.to("cuda" "")\ny = ("CUDA_VISIBLE_DEVICES"\n     "")\n',
    "f-strings": "import os, torch\nrank = int(os.environ['RANK'])\na = f\"cuda:{rank}\"\n"
                 "b = f\"{os.environ['CUDA_VISIBLE_DEVICES']}\"\nc = rf'cuda:{rank}'\nd = f'''cuda:{rank}'''\n"
                 "x = x.to(f\"cuda:{rank % 8}\")\n",
    "tabs": "import torch\nif True:\n\ttorch.cuda.synchronize()\n\tif x:\n\t\ttorch.cuda.empty_cache()\n",
    "two-spaces": "import torch\ndef f():\n  torch.cuda.synchronize()  # wait\n  return 1\n",
    "semicolons": "import torch\ntorch.cuda.synchronize();\na = 1; torch.cuda.synchronize()\n"
                  "torch.cuda.empty_cache(); b = 2\nif x: torch.cuda.synchronize()\n",
    "comments-in-call": "import torch\nx = x.cuda(  # move\n    0,  # first\n    non_blocking=True  # fast\n)\n",
    "built-strings": 'import os, torch\nrank = int(os.environ["LOCAL_RANK"])\na = "cuda:%d" % rank\n'
                     'b = "cuda:{}".format(rank)\nc = "cuda:" + str(rank)\nd = "cuda" + ":" + str(rank)\n'
                     'e = ("cuda:%d" % rank) if ok else "cpu"\n',
    "decorators": "import triton\n@triton.jit\ndef k(x):\n    pass\n@ triton.jit\ndef j(x):\n    pass\n"
                  "class A:\n    @triton.jit\n    def m(self):\n        pass\n",
    "import-forms": "from torch.cuda.amp import (autocast,\n    GradScaler)\nfrom torch.cuda import amp\n"
                    "from torch.cuda import amp, nvtx\nimport torch.cuda.amp as tca\nimport torch.cuda.amp\n"
                    "with autocast():\n    pass\n",
    "crlf": "import torch\r\ndef f():\r\n    torch.cuda.synchronize()\r\n    return x.cuda()\r\n",
    "tf32": "import torch\ntorch.backends.cuda.matmul.allow_tf32 = (args.tf32)\n"
            "torch.backends.cuda.matmul.allow_tf32 = False  # off\ntorch.backends.cudnn.allow_tf32 = True\n",
    "ddp": "import os, torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
           "rank = int(os.environ['LOCAL_RANK'])\nm = DDP(m, device_ids=[rank], output_device=rank)\n"
           "m = DDP(m, device_ids=([rank]))\nm = torch.nn.DataParallel(m)\n",
    "autocast-forms": "import torch\nfrom torch.cuda.amp import autocast\nwith torch.cuda.amp.autocast(enabled=True):\n"
                      "    pass\nwith autocast(True, torch.float16, True):\n    pass\nwith autocast(*a, **k):\n    pass\n"
                      "with torch.cuda.amp.autocast( True ,):\n    pass\ns = torch.cuda.amp.GradScaler(\n    init_scale=2.0,\n)\n",
    "memory": "import torch\na = torch.cuda.memory_allocated(0)\nb = torch.cuda.max_memory_allocated(device=0,)\n"
              "c = torch.cuda.mem_get_info()\nd = torch.cuda.memory_stats( 0 )\ntorch.cuda.reset_peak_memory_stats()\n"
              "e = torch.cuda.memory.memory_reserved()\nf = torch.cuda.memory_summary()\n",
    "bf16-stream": "import torch\nok = torch.cuda.is_bf16_supported(including_emulation=False)\n"
                   "ok2 = torch.cuda.is_bf16_supported()\ns = torch.cuda.Stream( )\nt = torch.cuda.Stream(priority=-1)\n"
                   "e = torch.cuda.Event(enable_timing=True)\ng = torch.cuda.CUDAGraph()\n",
    "is-cuda": "import torch\na = x.is_cuda\nb = (p + q).is_cuda\nif not t.is_cuda:\n    pass\nc = x . is_cuda\n",
    "shadowing": "from torch.cuda import synchronize, is_available\ndef synchronize():\n    pass\n"
                 "f(is_available=1)\nclass is_available:\n    pass\ndef g(synchronize=None):\n    return synchronize\n",
    "lambda-match": 'import torch\nf = lambda d="cuda": d\nmatch d:\n    case "cuda":\n        x = x.cuda()\n'
                    '    case _:\n        torch.cuda.synchronize()\n',
    "map-location": 'import torch\ns = torch.load(p, map_location={"cuda:0": "cuda:1"})\n'
                    's = torch.load(p, map_location="cuda:0")\ns = torch.load(p, map_location=lambda s, l: s)\n',
    "device-map": 'import torch\na = M.from_pretrained(n, device_map={"": "cuda:0"})\n'
                  'b = M.from_pretrained(n, device_map={"a": 0, "b": "cuda:1"})\nc = M.from_pretrained(n, device_map="cuda")\n'
                  'd = M.from_pretrained(n, device_map={**base, "": 1})\ne = M.from_pretrained(n, device_map="auto")\n',
    "nested": 'import torch\nd = torch.device("cuda", torch.cuda.current_device())\nx = x.cuda(torch.cuda.current_device())\n'
              'y = y.cuda().cuda(0)\nz = torch.device("cuda:1")\nw = torch.device("cuda")\nv = torch.device(f"cuda:{i}")\n'
              'torch.cuda.set_device(torch.cuda.current_device())\n',
    "device-context": "import torch\nwith torch.cuda.device(1):\n    pass\nx = x.cuda(device='cuda:1')\n"
                      "torch.cuda.set_device('cuda:1')\ntorch.cuda.set_device(dev)\nname = torch.cuda.get_device_name(0)\n",
    "optional-import": "try:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n"
                       "try:\n    import apex\nexcept (ImportError, OSError):\n    pass\nimport xformers\nfrom numba import cuda\n",
    "strings-in-docs": 'import torch\ndef f():\n    """Moves to "cuda" and uses NCCL_DEBUG."""\n    log("cuda")\n'
                       '    x = """\ncuda\n"""\n    return "cuda"\n',
    "bom-no-newline": "\ufeffimport torch\nx = x.cuda()",
    "continuation": "import torch\nx = \\\n    x.cuda()\ntorch.cuda.synchronize() \\\n    ; y = 1\n",
    "compare": 'import torch\nif device == "cuda": pass\nif dev.type in ("cuda", "xpu"): pass\nif "cuda:0" != d: pass\n'
               'ok = backend == "nccl"\n',
    "cpp-ext": "from torch.utils.cpp_extension import load, load_inline, CUDAExtension\n"
               "m = load(name='m', sources=['a.cpp', 'b' '.cu'])\nn = load_inline(name='n', cpp_sources=s, with_cuda=True)\n"
               "o = load(name='o', sources=[f'{d}/k.cu'])\n",
    "seed-guard-expr": "import torch\nx = torch.cuda.manual_seed(0) or 1\nprint(torch.cuda.synchronize())\n"
                       "n = torch.cuda.device_count\nk = torch.cuda.current_device\n",
    "fused": "import torch\nuse = torch.cuda.is_available()\nopt = torch.optim.AdamW(p, fused=use)\n"
             "kw = dict(fused=True) if device.type == 'cuda' else dict()\n",
    "spawn": "import torch.multiprocessing as mp\ndef worker(rank, world):\n    x = x.to(rank)\n"
             "    torch.cuda.set_device(rank)\nmp.spawn(worker, args=(2,), nprocs=2)\n",
    "parens-more": "import torch\nprint((torch.cuda.synchronize()))\nif (x.is_cuda):\n    pass\n"
                   "def f():\n    return (\"cuda\")\nok = not(x.is_cuda)\ny = (x).cuda()\nz = (x.cuda)()\n"
                   "w = (x.cuda())\ns = (torch.cuda.Stream)()\nwith (torch.cuda.amp.autocast)(True):\n    pass\n"
                   "v = x.to(\n    (\"cuda\")  # there\n)\nu = torch.device((\"cuda\"), (0))\n"
                   "t = ((torch.cuda.memory_allocated( (0) )))\n",
    "non-ascii-edits": "import torch\nx = f(\"ünï\", x.cuda(), torch.cuda.is_available(), \"cuda\" if ok else \"cpu\")\n"
                       "é = torch.device(\"cuda:0\") ; torch.cuda.synchronize()\n# ü\nd = {\"ß\": torch.cuda.amp.autocast(True)}\n",
    "glued-fstring": 'import os\nrank = int(os.environ["RANK"])\na = "cuda:" f"{rank}"\nb = rf"cuda:{rank}"\n'
                     'c = f"cuda:{rank}" "x"\nd = x.to(F"cuda:{rank}")\n',
}
