"""`coverage --sim-profile`: the ops a profile makes unsupported or fallback are listed so (issue 31, item 7)."""

import json
import subprocess
import sys

from .conftest import cli_env

PROFILE = {"name": "gaps", "unsupported_ops": ["aten.cumprod.default", "aten.sort.*"],
           "fallback_ops": ["aten.median.default"]}


def coverage(*args):
    """In a process of its own: the sim loads its profile once per process, as a real run does."""
    out = subprocess.run([sys.executable, "-m", "porting_cli", "coverage", "--device", "sim", "--format", "json",
                          *map(str, args)], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_profile_gaps_are_listed_as_missing_and_fallback(tmp_path):
    profile = tmp_path / "gaps.json"
    profile.write_text(json.dumps(PROFILE))
    import conformance.sim as sim
    from op_db.inventory import dispatcher_coverage

    sim.register()
    plain = dict(dispatcher_coverage("PrivateUse1"))  # registrations alone, as without a profile
    shown = coverage("--sim-profile", profile)
    kinds = {row["op"]: row["kind"] for row in shown["ops"]}
    assert shown["sim_profile"] == "gaps"
    assert kinds["aten.cumprod.default"] == "missing" and kinds["aten.median.default"] == "fallback"
    sorts = {op: kind for op, kind in kinds.items() if op.startswith("aten.sort.")}
    assert sorts and set(sorts.values()) == {"missing"}
    changed = {op for op in kinds if kinds[op] != plain[op]}
    assert changed == {"aten.cumprod.default", "aten.median.default", *sorts}
    assert shown["summary"]["missing"] == plain.get("missing", 0) + 1 + len(sorts) - sum(
        plain[op] == "missing" for op in ("aten.cumprod.default", *sorts))
