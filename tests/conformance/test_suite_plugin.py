"""A third-party suite plugs in through `neuron_check.suites`: the engine runs its items and the
CLI grows its command with the options its dataclass declares; nothing else changes."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from conformance import suite
from conformance.engine.config import RunConfig
from conformance.engine.local import InlineExecutor, run_items, start_run
from conformance.numerics import compare
from conformance.outcome import result_for
from op_db.records import Status, WorkItem
from op_db.store import Store


@dataclasses.dataclass(frozen=True)
class ToyOptions:
    factor: str = suite.cli_option("2", "--factor", "What to multiply by.")
    exact: bool = suite.cli_option(False, "--exact", "Compare bit for bit.", kind="flag")


class ToySuite:
    """Multiply a vector on the device and on the CPU."""

    name = "toy"
    command = "toy"
    options_type = ToyOptions
    default_timeout_s = 30.0

    def plan(self, options):
        return [WorkItem("toy", "mul", "forward", "float32", "eager")]

    def preload(self):
        pass

    def prepare(self, ctx):
        ctx.state["toy"] = "prepared"

    def run_item(self, item, ctx):
        import torch

        factor = float(ctx.config.options_of(ToyOptions).factor)
        dev = (torch.arange(4.0).to(ctx.device) * factor).cpu()
        return result_for(item, compare(dev, torch.arange(4.0) * 2), samples=1)


class _EntryPoint:
    value = "test_suite_plugin:ToySuite"

    def load(self):
        return ToySuite


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setattr(suite, "_entry_points", lambda: {"toy": _EntryPoint()})
    suite.get.cache_clear()
    yield
    suite.get.cache_clear()


def test_the_engine_runs_a_plugin_suite_and_the_outcome_rule_judges_it(toy_registered, tmp_path, sim_device):
    from conformance import backends

    adapter = backends.get("sim").init()
    assert "toy" in suite.names() and isinstance(suite.get("toy"), suite.Suite)
    with Store.open(tmp_path / "toy.db") as store:
        for factor, expected in (("2", Status.PASS), ("3", Status.MISMATCH)):
            config = RunConfig(backend="sim", device="sim", suite_options=ToyOptions(factor=factor))
            run_id = start_run(store, config, adapter, {"suite": "toy"})
            items = suite.plan("toy", ToyOptions(factor=factor))
            run_items(items, config, store, run_id, progress=False, executor=InlineExecutor())
            assert [r.status for r in store.results(run_id)] == [expected]


def test_the_cli_grows_the_plugin_command_with_its_options(toy_registered):
    from porting_cli.cli.app import main

    runner = CliRunner()
    listed = runner.invoke(main, ["--help"])
    assert "toy" in listed.output
    shown = runner.invoke(main, ["toy", "--help"])
    assert shown.exit_code == 0, shown.output
    for option in ("--factor", "--exact", "--device", "--jobs", "--resume", "--fail-on", "--timeout"):
        assert option in shown.output
    assert "(30 s)" in shown.output  # the suite's default --timeout


def test_unknown_suite_is_one_sentence():
    from op_db.errors import InputError

    with pytest.raises(InputError, match="unknown suite 'nope'"):
        suite.get("nope")
