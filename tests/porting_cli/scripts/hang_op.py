"""An op that never returns on the target (a sim `hang` fault on erfinv); the
script may also block SIGALRM, so only the parent's kill can stop it."""
import signal
import sys

import torch

if "--block-alarm" in sys.argv:
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
x = torch.rand(16, device="cuda") * 0.5  # MARK: before
y = torch.erfinv(x)  # MARK: hang
print("never printed", y.sum())
