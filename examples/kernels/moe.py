"""An MoE blockwise grouped matmul: tokens sorted by expert, each expert's rows processed in
blocks of BLOCK (the last block padded), and the plain per-expert loop it must match.

x [T, H], w [E, H, N], counts int64 [E] (tokens per expert, summing to T) -> [T, N].
"""

from __future__ import annotations

import torch

BLOCK = 8


def reference(x, w, counts):
    out, start = [], 0
    for expert, count in enumerate(counts.tolist()):
        out.append(x[start:start + count] @ w[expert])
        start += count
    return torch.cat(out) if out else x.new_zeros((0, w.shape[-1]))


def blockwise(x, w, counts, *, bugs: frozenset = frozenset()):
    outputs, start = [], 0
    for expert, count in enumerate(counts.tolist()):
        rows = x[start:start + count]
        start += count
        if count == 0 and "empty_expert_crash" not in bugs:
            outputs.append(x.new_zeros((0, w.shape[-1])))
            continue
        # The last block is padded with copies of the last token; an expert with no tokens has
        # none to copy (IndexError): the planted bug, when it is not skipped above.
        last = rows[-1]
        padded = torch.cat([rows, last.expand((-count) % BLOCK, -1)])
        blocks = padded.reshape(-1, BLOCK, x.shape[-1]).float() @ w[expert].float()
        outputs.append(blocks.reshape(-1, w.shape[-1])[:count].to(x.dtype))
    return torch.cat(outputs) if outputs else x.new_zeros((0, w.shape[-1]))
