"""A small CUDA training loop with a LayerNorm (fixture of the porting-check tests)."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        x = self.proj(x)
        return self.norm(x)  # MARK: layer_norm


def get_model_and_inputs():
    torch.manual_seed(0)
    return Block(), (torch.randn(4, 8),)


def main():
    torch.manual_seed(0)
    model = Block().cuda()  # MARK: module_cuda
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device="cuda")  # MARK: factory_device
    for step in range(100):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # MARK: backward
        opt.step()
        print("step", step, flush=True)


if __name__ == "__main__":
    main()
