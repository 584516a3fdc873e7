"""Runs a little, then leaves with sys.exit(3)."""
import sys

import torch

x = torch.ones(3).to("cuda:0") + 1  # MARK: to_cuda
sys.exit(3)
