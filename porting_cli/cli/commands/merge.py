"""`neuron-check merge`: combine shard databases from a CI matrix."""

from __future__ import annotations

import click


@click.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Database to write (created if missing; merged runs are added to it).")
def command(inputs: tuple[str, ...], output: str) -> None:
    """Merge shard databases into OUTPUT: one run per original run.

    Shards belong together when they share `run_group` (set by the run
    commands from --run-group / $NEURON_CHECK_RUN_GROUP), else when backend,
    device, versions, git revision, shard count and every recorded option but
    --shard and --jobs are equal (--db, --junit and other output paths are
    not options of a run). An unsharded run, or a shard seen twice, stays a
    run of its own.

    \b
    neuron-check merge shard-0.db shard-1.db shard-2.db -o nightly.db
    """
    from op_db.merge import merge_stores
    from op_db.text import plural
    from reports.sanitize import echo

    for run in merge_stores(list(inputs), output):
        twice = run["duplicate_items"]
        note = f", {plural(twice, 'item')} found in two shards" if twice else ""
        status = f" ({run['status']})" if run["status"] != "finished" else ""
        echo(f"run {run['id']}: {plural(run['results'], 'result')} from {plural(run['shards'], 'shard')}{note}{status}")
