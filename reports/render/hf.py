"""Results as a Hugging Face `datasets.Dataset`: the form analysis notebooks and agents load.

One row per result with exactly the Parquet export's columns
(`reports.render.parquet` defines them once), so several runs make one
dataset told apart by `run_id`. The run rows go into the dataset info's
`description` as JSON (`{"neuron_check": {"schema": 1, "runs": [...]}}`):
`datasets.DatasetInfo` has no free-form metadata field, and the description
survives `save_to_disk`, `load_from_disk` and the Hub alike.

`write_dataset` only touches the network when `push_to_hub` names a repo.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from op_db.errors import InputError
from reports.model import JSON_SCHEMA, Report
from reports.render.parquet import parquet_rows, parquet_schema, run_metadata

DATASET_NAME = "neuron-check-results"


def results_dataset(reports: list[Report]):
    """One `datasets.Dataset` holding every result of `reports`, run metadata in its info."""
    import datasets
    import pyarrow as pa

    rows = [row for report in reports for row in parquet_rows(report)]
    table = pa.Table.from_pylist(rows, schema=parquet_schema())
    info = datasets.DatasetInfo(
        description=json.dumps({"neuron_check": {"schema": JSON_SCHEMA,
                                                 "runs": [run_metadata(r) for r in reports]}},
                               sort_keys=True, default=str),
        dataset_name=DATASET_NAME,
        features=datasets.Features.from_arrow_schema(table.schema),
    )
    return datasets.Dataset(table, info=info)


def run_info(dataset: Any) -> list[dict[str, Any]]:
    """The run rows a dataset written here carries (`[]` for any other dataset)."""
    try:
        return json.loads(dataset.info.description or "{}").get("neuron_check", {}).get("runs", [])
    except (ValueError, AttributeError):
        return []


def write_dataset(reports: list[Report], out_dir: str | Path, push_to_hub: str | None = None) -> int:
    """save_to_disk into `out_dir` (and push to the Hub repo `push_to_hub`); returns the row count."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"cannot write the dataset to {out}: it exists and is not a folder.")
    if not out.parent.exists():
        raise InputError(f"cannot write the dataset to {out}: folder {out.parent} does not exist.")
    import sys

    import datasets

    if not sys.stderr.isatty():
        datasets.disable_progress_bars()  # quiet in CI logs, as every long step here
    dataset = results_dataset(reports)
    try:
        dataset.save_to_disk(str(out))
    except (OSError, PermissionError) as exc:
        raise InputError(f"cannot write the dataset to {out}: {exc.strerror or exc}.") from None
    if push_to_hub:
        dataset.push_to_hub(push_to_hub)
    return dataset.num_rows


def reports_for(store: Any, run_specs: list[str], all_runs: bool) -> list[Report]:
    """The reports of `--runs 3,4,5` (in that order) or of `--all` runs (by id)."""
    from reports.model import report_from_store

    specs = [run["id"] for run in store.runs()] if all_runs else run_specs
    if not specs:
        raise InputError(f"{store.path} holds no runs yet.")
    return [report_from_store(store, spec) for spec in specs]
