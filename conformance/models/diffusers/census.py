"""The Diffusers census check of one class: build it tiny, make its inputs, run one fp32 forward
(an autoencoder's encode and decode) on CPU and record the aten overloads it dispatched. The
census engine, the causes and the summary are the Transformers zoo's (conformance/models/census.py).
"""

from __future__ import annotations

import time


def check_class(entry):
    """PairStatus of `entry` (a DiffusersEntry); never raises."""
    import torch

    from conformance.models.causes import classify
    from conformance.models.census import PairStatus
    from conformance.models.diffusers import zoo
    from conformance.models.diffusers.forward import run_forward
    from conformance.models.diffusers.item import make_inputs
    from conformance.reference.oprecord import record_ops

    start = time.perf_counter()
    stage = "model"
    try:
        model = zoo.build_model(entry)
        stage = "inputs"
        inputs = make_inputs(model, entry, 0)
        stage = "forward"
        with torch.no_grad(), record_ops("cpu") as recorder:
            run_forward(model, inputs)
        ops = tuple(sorted(recorder.ops))
    except Exception as exc:  # noqa: BLE001 - the failure is this class's status
        failure = classify(exc, stage)
        return PairStatus(entry.subject, entry.model_type, entry.task, False, failure.cause, failure.detail,
                          time.perf_counter() - start)
    return PairStatus(entry.subject, entry.model_type, entry.task, True, seconds=time.perf_counter() - start, ops=ops)
