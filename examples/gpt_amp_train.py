"""Train a tiny GPT with CUDA mixed precision — written the CUDA-only way on purpose.

This is the kind of script `neuron-check gpt_amp_train.py` is for: it uses
`.cuda()`, `torch.cuda.amp`, cuDNN/TF32 switches, `torch.cuda.synchronize()`
and CUDA memory statistics. `neuron-check --fix` turns it into a script that
runs on any accelerator, or on the CPU:

    python examples/gpt_amp_train.py --steps 2      # needs CUDA as written
"""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True

VOCAB, BLOCK, WIDTH, HEADS, LAYERS = 64, 32, 64, 4, 2


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=VOCAB, block=BLOCK, width=WIDTH, heads=HEADS, layers=LAYERS):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(block, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        return self.head(self.ln(self.blocks(x)))


def get_batch(batch: int, generator: torch.Generator):
    """Sequences that count up modulo VOCAB from a random start: easy to learn."""
    start = torch.randint(0, VOCAB, (batch, 1), generator=generator)
    seq = (start + torch.arange(BLOCK + 1)) % VOCAB
    return seq[:, :-1], seq[:, 1:]


def get_model_and_inputs():
    """The model and one batch of inputs, on the CPU (for the runtime checker)."""
    torch.manual_seed(0)
    x, _ = get_batch(2, torch.Generator().manual_seed(0))
    return GPT(), (x,)


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = torch.cuda.amp.GradScaler()
    gen = torch.Generator().manual_seed(0)
    torch.cuda.reset_peak_memory_stats()

    loss = torch.tensor(math.nan)
    for step in range(args.steps):
        t0 = time.perf_counter()
        x, y = (t.cuda(non_blocking=True) for t in get_batch(args.batch, gen))
        with torch.cuda.amp.autocast():
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        torch.cuda.synchronize()
        print(f"step {step:3d}  loss {loss.item():.4f}  {1000 * (time.perf_counter() - t0):.1f} ms")
    peak = torch.cuda.max_memory_allocated() / 2**20
    print(f"final loss {loss.item():.4f}; peak memory {peak:.1f} MiB")
    return loss.item()


if __name__ == "__main__":
    main()
