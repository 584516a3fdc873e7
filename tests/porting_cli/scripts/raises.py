"""Does some device work, then fails in the user's own code."""
import torch


def load_batch(x):
    if x.sum() > 0:
        raise ValueError("batch file is missing")  # MARK: raise
    return x


x = torch.ones(3, device="cuda").mul(2)
load_batch(x)
