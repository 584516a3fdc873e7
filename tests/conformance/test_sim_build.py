"""Building the sim extension: one build for many processes starting at once, a clear
sentence where no compiler exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]

# Each process loads the extension from an empty cache folder at the same moment. The build
# step is a slow copy of the library this session built (the lock, the private build folder
# and the final rename are what is tested, not the compiler); each build is logged.
_RACER = """
import shutil, sys, time
from pathlib import Path
from conformance.sim import build

built, log = Path(sys.argv[1]), Path(sys.argv[2])

def slow_copy(target):
    with open(log, "a") as f:
        f.write("build\\n")
    partial = target.parent / "partial.so"
    shutil.copyfile(built, partial)
    time.sleep(1.0)
    partial.replace(target)

module = build.load(build=slow_copy)
assert hasattr(module, "cpu_view")
print("loaded")
"""


def test_parallel_first_starts_build_once_and_all_load(sim_device, tmp_path):
    from conformance.sim import build

    built = build.library_path()
    assert built.exists()
    cache, log = tmp_path / "cache", tmp_path / "builds.log"
    env = {**os.environ, build.CACHE_ENV: str(cache), "PYTHONPATH": str(REPO)}
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(built), str(log)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=120) for p in racers]
    assert [p.returncode for p in racers] == [0] * 3, [err[-800:] for _, err in outputs]
    assert all(out.strip() == "loaded" for out, _ in outputs)
    assert log.read_text().splitlines() == ["build"]
    (folder,) = cache.iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["build.lock", f"{build.NAME}.so"]


def test_no_compiler_is_one_sentence_and_exit_2(tmp_path):
    env = {**os.environ, "NEURON_CHECK_SIM_CACHE": str(tmp_path / "empty"), "CXX": "no-such-compiler-here",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "porting_cli", "ops", "--device", "sim", "--ops", "abs",
                           "--dtype", "fp32", "--db", str(tmp_path / "t.db")],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no C++ compiler was found" in lines[0] and "g++" in lines[0], done.stderr
