"""Work items -> isolated workers (local processes or Ray actors) -> results in the store.

`local` holds the run loop and the local process pool, `worker` the process that owns a
device, `ray` the Ray executor, and `config` the run configuration and the worker context every
suite receives. The helpers every executor shares live beside them: `harness_time` (the
harness's share of an item's time), `lifeline` (workers die with their parent, SIGTERM stops a
run like Ctrl-C), `proctree` (the processes a run left behind) and `import_noise` (known third-party
import warnings kept off the terminal). Callers import the module
they need (`conformance.engine.local`): this package imports nothing itself.
"""
