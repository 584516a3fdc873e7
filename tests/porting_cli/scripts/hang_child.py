"""The script's child process hangs, and so does a grandchild that left the session (setsid);
the main process waits for the child forever. Each writes its pid to PIDS/<name>.pid."""
import multiprocessing as mp
import os
import sys
import time

PIDS = sys.argv[1]


def note(name):
    with open(os.path.join(PIDS, f"{name}.pid"), "w") as handle:
        handle.write(str(os.getpid()))


def child():
    note("child")
    if os.fork() == 0:  # a daemon-like grandchild outside the process group
        os.setsid()
        note("grandchild")
        while True:
            time.sleep(1)
    import torch  # after the pids are written: a spawned child takes seconds to import it

    x = torch.ones(4, device="cuda")
    while True:
        x = torch.cos(x)  # MARK: child_loop
        time.sleep(0.05)


if __name__ == "__main__":
    os.makedirs(PIDS, exist_ok=True)
    note("main")
    worker = mp.get_context(sys.argv[2] if len(sys.argv) > 2 else "spawn").Process(target=child)
    worker.start()
    worker.join()  # MARK: join
