"""A suite command offers the compile flags only where it has a compile mode (issue 31, item 6):
`dist` has no compiled checks, so it neither lists nor accepts them."""

import pytest
from click.testing import CliRunner

from porting_cli.cli.app import main

COMPILE_FLAGS = ("--compile-backend", "--fullgraph", "--dynamic", "--compile-options")


def invoke(*args):
    return CliRunner().invoke(main, list(args), prog_name="neuron-check")


def test_dist_lists_no_compile_flags():
    out = invoke("dist", "--help")
    assert out.exit_code == 0
    assert not [flag for flag in COMPILE_FLAGS if flag in out.output]


@pytest.mark.parametrize("flag", COMPILE_FLAGS)
def test_dist_refuses_a_compile_flag(flag):
    out = invoke("dist", "--device", "sim", flag, *(["x"] if flag in ("--compile-backend", "--compile-options") else []))
    assert out.exit_code == 2
    line = out.output.strip()
    assert line.startswith(f"neuron-check: error: No such option '{flag}'") and "\n" not in line
    assert line.endswith("(see 'neuron-check dist --help').")


@pytest.mark.parametrize("command", ["ops", "models"])
def test_suites_with_a_compile_mode_keep_them(command):
    out = invoke(command, "--help")
    assert [flag for flag in COMPILE_FLAGS if flag in out.output] == list(COMPILE_FLAGS)


@pytest.mark.parametrize(("name", "modes", "expected"), [
    ("opinfo", ("eager",), 120.0),
    ("opinfo", ("compile",), 600.0),
    ("opinfo", ("eager", "compile"), 600.0),
    ("model", ("compile",), 1500.0),
    ("dist", None, 120.0),
])
def test_compile_mode_gets_five_times_the_suites_time_limit(name, modes, expected):
    # Compiling every sample's graph is inside the item's time; the limit is a hang guard.
    from conformance import suite
    from porting_cli.cli.suite_cli import default_timeout_s

    chosen = suite.get(name)
    options = chosen.options_type(**({"modes": modes} if modes else {}))
    assert default_timeout_s(chosen, options) == expected
