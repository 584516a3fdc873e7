"""Predicted status of an op on the target (`--against RUN|PROFILE.json`): from a stored run
in the results database, or from a sim coverage profile. Imports nothing heavy."""

from __future__ import annotations

import os
from typing import Any

from op_db.errors import InputError


class Prediction:
    """Predicted status of an op on the target, from a stored run or a sim profile (--against)."""

    def __init__(self, source: str, unsupported: Any, fallback: Any, supported: set[str] | None):
        self.source = source
        self._unsupported, self._fallback, self._supported = unsupported, fallback, supported

    def status_of(self, op: str) -> str:
        if self._unsupported(op):
            return "UNSUPPORTED"
        if self._fallback(op):
            return "FALLBACK"
        if self._supported is None or op in self._supported:
            return "ran"
        return "untested"

    @classmethod
    def load(cls, spec: str, db_path: str | None) -> "Prediction":
        if spec.endswith(".json") or os.path.isfile(spec):
            return cls._from_profile(spec)
        return cls._from_run(spec, db_path)

    @classmethod
    def _from_profile(cls, path: str) -> "Prediction":
        if not os.path.isfile(path):
            raise InputError(f"--against {path}: no such profile file.")
        from op_db.sim_profile import load_profile

        profile = load_profile(path)
        # A profile lists what is missing; every other op is taken as supported.
        return cls(f"profile {os.path.basename(path)} ({profile.name})", profile.is_unsupported_op,
                   profile.is_fallback_op, None)

    @classmethod
    def _from_run(cls, spec: str, db_path: str | None) -> "Prediction":
        from op_db.records import WORKING, Status
        from op_db.store import open_for_reading

        with open_for_reading(db_path) as store:
            run_id = store.resolve_run(spec)
            results = store.results(run_id)
        unsupported = {r.failing_op for r in results if r.status == Status.UNSUPPORTED and r.failing_op}
        fallback = {op for r in results for op in r.fallback_ops}
        supported = {op for r in results if r.status in WORKING for op in r.aten_ops}
        return cls(f"run {run_id}", unsupported.__contains__, fallback.__contains__, supported)
