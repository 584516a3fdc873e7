"""The distributed suite (`neuron-check dist`): collectives x dtypes x layouts, DDP/FSDP2
training-step parity, and streams and events, each item run in lock-step by
every rank of a world of N local processes (conformance/dist/world.py).

Modules: process_group (which c10d backend a device uses, and joining a world), plan (the
items), collectives, parity, streams (the checks a rank runs), rank (a rank
process), world (the parent: worlds, timeouts, crashes).
"""

SUITE = "dist"
