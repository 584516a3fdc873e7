"""Leaves without returning to Python: os._exit(4)."""
import os

import torch

x = torch.ones(3).cuda() * 2
os._exit(4)
