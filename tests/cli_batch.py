"""Run many neuron-check command lines in one Python process, each through ``porting_cli.cli.app.main``
(which the console script's ``console_main`` wraps), with its own working folder, environment and argv.

Used by tests that check how the CLI meets bad input: one process imports torch once instead
of once per command line. Each command's stderr is read from file descriptor 2 itself, so
whatever reaches the terminal (click's output, warnings, a traceback) is captured.

    python tests/cli_batch.py CASES.json OUTCOMES.json

CASES.json: a list of {"id", "argv", "cwd", "env"}; OUTCOMES.json: {id: {"code", "stderr"}}.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback


def run_one(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[int, str]:
    from porting_cli.cli.app import main

    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    saved_fd = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.environ.update(env)
        sys.argv = ["neuron-check", *argv]
        os.chdir(cwd)
        sys.stderr.flush()
        os.dup2(captured.fileno(), 2)
        code = 0
        try:
            main(args=argv, prog_name="neuron-check")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - what an uncaught exception would print
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            os.chdir(saved_cwd)
            sys.argv = saved_argv
            os.environ.clear()
            os.environ.update(saved_env)
        captured.seek(0)
        return code, captured.read().decode("utf-8", "replace")


def main() -> None:
    cases_path, outcomes_path = sys.argv[1:3]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    out = {}
    for case in cases:
        code, stderr = run_one(case["argv"], case["cwd"], case["env"])
        out[case["id"]] = {"code": code, "stderr": stderr}
    with open(outcomes_path, "w", encoding="utf-8") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
