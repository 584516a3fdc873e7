"""Pinned host memory, three ways: kept where the target pins host memory (sim does)."""
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
loader = DataLoader(data, batch_size=4, pin_memory=True)  # MARK: loader
staging = torch.empty(4, 4, pin_memory=True)  # MARK: factory
model = torch.nn.Linear(4, 1).to("cuda")
for x, y in loader:  # MARK: loop
    x = x.pin_memory()  # MARK: method
    loss = (model(x.to("cuda", non_blocking=True)) - y.cuda()).pow(2).mean()
    loss.backward()
print("pinned", staging.is_pinned())
