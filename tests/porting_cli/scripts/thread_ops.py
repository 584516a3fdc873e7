"""Ops issued from a helper thread whose code is library code: they are blamed on the user
line that started the thread, not on wherever the main thread happens to be."""
import threading
import time

import torch

x = torch.ones(4, device="cuda")
worker = threading.Thread(target=torch.sin, args=(x,))
worker.start()  # MARK: start
time.sleep(0.5)  # MARK: sleep
worker.join()
