"""The command group: conventions every command shares."""

import json
import subprocess
import sys

import pytest

from porting_cli.cli.app import COMMANDS, route_script


def run_cli(*args, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "porting_cli", *args], capture_output=True, text=True, timeout=120, **kwargs
    )


def test_help_does_not_import_torch():
    probe = (
        "import sys\n"
        "from porting_cli.cli.app import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().endswith("NO-TORCH"), out.stdout + out.stderr


def test_help_lists_the_commands_that_exist():
    out = run_cli("--help")
    assert out.returncode == 0
    assert "devices" in out.stdout


def test_devices_table_and_json():
    table = run_cli("devices")
    assert table.returncode == 0, table.stderr
    assert "dispatch key" in table.stdout and "PrivateUse1" in table.stdout
    data = json.loads(run_cli("devices", "--format", "json").stdout)
    by_name = {d["name"]: d for d in data["devices"]}
    assert by_name["cpu"]["available"] is True
    assert by_name["neuron"]["available"] is False
    assert by_name["sim"]["simulated"] is True
    assert set(COMMANDS) >= {"ops", "models", "port", "devices", "report", "gate"}


def test_unknown_command_is_a_usage_error():
    out = run_cli("frobnicate")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "argv, routed",
    [
        (["train.py", "--static-only"], ["port", "train.py", "--static-only"]),
        (["--debug", "examples/x.py"], ["--debug", "port", "examples/x.py"]),
        (["ops", "--ops", "a.py"], ["ops", "--ops", "a.py"]),
        (["devices"], ["devices"]),
        (["port", "train.py"], ["port", "train.py"]),
    ],
)
def test_script_paths_are_routed_to_the_porting_command(argv, routed):
    assert route_script(argv) == routed
