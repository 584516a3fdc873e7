"""A small training loop for `neuron-check trace` tests: one fallback op, one delayed op, a sync."""
import torch


def squash(x):
    return torch.tanh(x)  # MARK: delayed


model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(32, 8)
for step in range(10):
    x = data.cuda()  # MARK: copy
    h = squash(model(x))  # MARK: forward
    m = torch.median(h)  # MARK: fallback
    loss = (h - m).pow(2).mean()
    opt.zero_grad()
    loss.backward()  # MARK: backward
    opt.step()
    value = loss.item()  # MARK: sync
