"""A training loop with a compiled block that breaks its graph once and recompiles for a new length."""
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):  # MARK: forward-def
        h = torch.relu(self.proj(x))
        torch._dynamo.graph_break()  # MARK: break
        return h.sum(dim=-1)


block = Block().cuda()
step = torch.compile(block, backend="eager", dynamic=False)
opt = torch.optim.SGD(block.parameters(), lr=0.01)
for length in (4, 4, 6, 6):
    loss = step(torch.randn(length, 8).cuda()).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
