"""Never ends on its own: the porting check must stop it at --max-seconds."""
import torch

x = torch.ones(16).cuda()  # MARK: tensor_cuda
while True:
    x = torch.sin(x)  # MARK: sin
