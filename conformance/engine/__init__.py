"""Work items -> isolated workers (local processes or Ray actors) -> results in the store.

`local` holds the run loop and the local process pool, `worker` the process that owns a
device, `ray` the Ray executor. The names other packages use are re-exported here.
"""

from conformance.engine.local import (  # noqa: F401
    EXECUTORS, EngineError, Executor, InlineExecutor, LocalExecutor, RunStopped, RunSummary, get_executor,
    prestart_workers, run_items, run_metadata, start_run,
)
