"""Known third-party import warnings are dropped; every other message of those loggers stays."""

import logging
import subprocess
import sys

import pytest

from conformance.engine.import_noise import KNOWN_NOISE, KnownNoise, silence_known_noise

SAMPLES = {
    "torchao": "Failed to load /venv/site-packages/torchao/_C_cutlass_90a.abi3.so: Could not load this library",
    "torch.utils._pytree": "<enum 'KernelPreference'> is an Enum subclass and is now natively supported by "
    "torch.compile as an opaque value type.",
    "diffusers.quantizers.torchao.torchao_quantizer": "Unable to import `torchao` Tensor objects. This may affect",
    "transformers.utils.import_utils": "`CLIPImageProcessor` requires torchvision (not installed); falling back to "
    "`CLIPImageProcessorPil` for backward compatibility.",
}


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def collected(monkeypatch):
    """The table's loggers as they are before any silencing, each collecting what it emits.

    Earlier tests of this process may have silenced them (the CLI does) or set a library's
    verbosity; both are undone here and restored afterwards."""
    monkeypatch.delenv("NEURON_CHECK_DEBUG", raising=False)
    handler = Collect()
    loggers = [logging.getLogger(noise.logger) for noise in KNOWN_NOISE]
    saved = [(lg, list(lg.filters), lg.propagate, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.filters[:] = [f for f in lg.filters if type(f).__name__ != "_DropKnown"]
        lg.addHandler(handler)
        lg.propagate = False
        lg.setLevel(logging.WARNING)
        lg.disabled = False
    yield handler
    for lg, filters, propagate, level, disabled in saved:
        lg.removeHandler(handler)
        lg.filters[:] = filters
        lg.propagate = propagate
        lg.setLevel(level)
        lg.disabled = disabled


def test_every_table_row_has_a_sample():
    assert {noise.logger for noise in KNOWN_NOISE} == set(SAMPLES)


@pytest.mark.parametrize("logger_name", sorted(SAMPLES))
def test_known_message_dropped_other_message_kept(collected, logger_name):
    silence_known_noise()
    logger = logging.getLogger(logger_name)
    logger.warning(SAMPLES[logger_name])
    logger.warning("a warning nobody listed")
    assert collected.messages == ["a warning nobody listed"]


def test_a_child_logger_is_not_filtered_by_its_parent_row(collected):
    # Logger filters see only their own records: a row names the exact emitting logger.
    silence_known_noise((KnownNoise("torchao", "Failed", "test"),))
    logging.getLogger("torchao.quantization").warning("Failed to load x")
    assert collected.messages == ["Failed to load x"]


def test_debug_shows_everything(collected, monkeypatch):
    monkeypatch.setenv("NEURON_CHECK_DEBUG", "1")
    silence_known_noise()
    logging.getLogger("torchao").warning(SAMPLES["torchao"])
    assert collected.messages == [SAMPLES["torchao"]]


def test_silencing_twice_keeps_one_filter(collected):
    silence_known_noise()
    silence_known_noise()
    assert sum(type(f).__name__ == "_DropKnown" for f in logging.getLogger("torchao").filters) == 1


DROP_COUNTING_IMPORT = """
import sys
from conformance.engine import import_noise
dropped = []
keep = import_noise._DropKnown.filter
import_noise._DropKnown.filter = lambda self, record: keep(self, record) or dropped.append(record) or False
import_noise.silence_known_noise()
import torchao
print("dropped", len(dropped), file=sys.stderr)
"""


def test_real_torchao_import_is_quiet():
    pytest.importorskip("torchao")
    run = subprocess.run([sys.executable, "-c", DROP_COUNTING_IMPORT], capture_output=True, text=True, timeout=300)
    dropped = int(run.stderr.rsplit("dropped", 1)[1])
    if dropped == 0:
        pytest.skip("this torchao loads all its kernels and warns of nothing listed")
    assert "Failed to load" not in run.stderr and "Enum subclass" not in run.stderr
