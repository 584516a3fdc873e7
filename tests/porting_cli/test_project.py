"""Project mode: which files a folder contributes (gitignore, virtualenvs, links), the entry
script, bad input, one report for the folder, and ops attributed to imported modules' lines."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from op_db.errors import InputError
from porting_cli.analysis.gitignore import IgnoreFile, is_ignored
from porting_cli.analysis.project import discover, scan_project, walk

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]


def make_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize("pattern, path, is_dir, ignored", [
    ("*.tmp.py", "a/b/x.tmp.py", False, True),          # no slash: any depth
    ("*.tmp.py", "a/b/x.py", False, False),
    ("/top.py", "top.py", False, True),                 # leading slash: anchored
    ("/top.py", "sub/top.py", False, False),
    ("docs/gen.py", "docs/gen.py", False, True),        # middle slash: anchored
    ("docs/gen.py", "x/docs/gen.py", False, False),
    ("out/", "out", True, True),                        # dir-only
    ("out/", "out", False, False),
    ("**/cache", "a/b/cache", True, True),
    ("a/**/z.py", "a/z.py", False, True),
    ("a/**/z.py", "a/b/c/z.py", False, True),
    ("logs/**", "logs/x/y.py", False, True),
    ("file?.py", "file1.py", False, True),
    ("file?.py", "file10.py", False, False),
    ("[ab].py", "b.py", False, True),
    ("[!ab].py", "b.py", False, False),
    ("\\#hash.py", "#hash.py", False, True),            # escaped comment character
    ("# comment", "# comment", False, False),
])
def test_gitignore_pattern_semantics(pattern, path, is_dir, ignored):
    assert is_ignored([IgnoreFile.parse(pattern)], path, is_dir) is ignored


def test_gitignore_negation_last_match_wins_and_nested_files_apply_below_their_folder():
    top = IgnoreFile.parse("*.gen.py\n!keep.gen.py\n")
    nested = IgnoreFile.parse("keep.gen.py\n", base="sub")
    assert is_ignored([top], "a.gen.py", False) and not is_ignored([top], "keep.gen.py", False)
    assert is_ignored([top, nested], "sub/keep.gen.py", False)
    assert not is_ignored([top, nested], "keep.gen.py", False)


def test_walk_skips_vcs_virtualenvs_build_caches_and_what_gitignore_ignores(tmp_path):
    make_tree(tmp_path, {
        "train.py": "", "pkg/model.py": "", "pkg/keep.tmp.py": "", "pkg/drop.tmp.py": "",
        ".gitignore": "generated/\n*.tmp.py\n!keep.tmp.py\n/local.py\n",
        "generated/made.py": "", "local.py": "", "pkg/local.py": "",
        ".git/hooks/x.py": "", "venv/lib.py": "", ".venv/lib.py": "", "env/lib.py": "",
        "myenv/pyvenv.cfg": "home = /usr\n", "myenv/lib/site.py": "", "build/lib/x.py": "",
        "lib/site-packages/dep.py": "", "pkg/__pycache__/model.py": "", "notes.txt": "",
        "sub/.gitignore": "secret.py\n", "sub/secret.py": "", "sub/ok.py": "",
    })
    files, warnings = walk(str(tmp_path))
    assert files == ["pkg/keep.tmp.py", "pkg/local.py", "pkg/model.py", "sub/ok.py", "train.py"]
    assert warnings == []


def test_symlink_loop_is_skipped_with_a_warning_and_the_walk_goes_on(tmp_path):
    make_tree(tmp_path, {"train.py": "", "pkg/a.py": ""})
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "again")  # pkg/again -> pkg: a loop
    os.symlink("missing.py", tmp_path / "dangling.py")
    os.symlink("self_loop.py", tmp_path / "self_loop.py")
    files, warnings = walk(str(tmp_path))
    assert files == ["pkg/a.py", "train.py"]
    assert any(w.startswith("pkg/again: symbolic link loop") for w in warnings)
    assert any(w.startswith("dangling.py: broken symbolic link") for w in warnings)
    assert any(w.startswith("self_loop.py: broken symbolic link") for w in warnings)


@pytest.mark.parametrize("names, entry", [
    (["train.py", "util.py"], "train.py"),
    (["main.py", "util.py"], "main.py"),
    (["train.py", "main.py"], None),   # both: ambiguous
    (["util.py"], None),               # neither
])
def test_default_entry_is_the_one_top_level_train_or_main(tmp_path, names, entry):
    make_tree(tmp_path, {name: "" for name in names})
    project = discover(str(tmp_path))
    assert project.entry == entry
    if entry is None:
        with pytest.raises(InputError, match="name it with --entry FILE"):
            project.require_entry()


def test_entry_option_resolves_against_the_cwd_or_the_root_and_must_exist(tmp_path, monkeypatch):
    make_tree(tmp_path / "proj", {"scripts/run.py": "", "lib.py": ""})
    assert discover(str(tmp_path / "proj"), "scripts/run.py").entry == "scripts/run.py"
    monkeypatch.chdir(tmp_path)
    assert discover("proj", "proj/scripts/run.py").entry == "scripts/run.py"
    with pytest.raises(InputError, match="--entry nope.py: no such file"):
        discover("proj", "nope.py")


def test_non_utf8_file_is_skipped_with_a_warning_and_the_scan_goes_on(tmp_path):
    make_tree(tmp_path, {"train.py": "import torch\nx = torch.ones(1).cuda()\n"})
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\nimport torch\ntorch.ones(1).cuda()\n")
    scanned = scan_project(discover(str(tmp_path)))
    assert [(f["path"], "error" in f) for f in scanned.files] == [("latin1.py", True), ("train.py", False)]
    assert "not UTF-8" in scanned.files[0]["error"]
    assert len(scanned.warnings) == 1 and scanned.warnings[0].startswith("skipped latin1.py: ")
    assert "not UTF-8" in scanned.warnings[0]
    assert [(f.path, f.line, f.rule_id) for f in scanned.result.findings] == [("train.py", 2, "NC101")]


def cli(args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "porting_cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=env)


def one_sentence_exit_2(out, start):
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.startswith(f"neuron-check: error: {start}"), out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1


def test_bad_input_folder_without_python_files(tmp_path):
    make_tree(tmp_path, {"empty/README.md": "hi", "empty/venv/x.py": ""})
    one_sentence_exit_2(cli(["empty", "--static-only"], tmp_path), "empty holds no Python files")


def test_bad_input_path_that_is_a_symlink_loop(tmp_path):
    os.symlink("loop", tmp_path / "loop")
    one_sentence_exit_2(cli(["port", "loop", "--static-only"], tmp_path), "loop is a broken symbolic link or a symbolic link loop")


def test_bad_input_missing_entry(tmp_path):
    make_tree(tmp_path, {"proj/train.py": "x = 1\n"})
    one_sentence_exit_2(cli(["proj", "--entry", "nope.py", "--device", "sim"], tmp_path), "--entry nope.py: no such file")


def test_bad_input_folder_without_an_entry_when_the_runtime_is_asked_for(tmp_path):
    make_tree(tmp_path, {"proj/a.py": "x = 1\n", "proj/b.py": "y = 2\n"})
    one_sentence_exit_2(cli(["proj", "--device", "sim"], tmp_path), "cannot tell which script")


def copy_package(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "project_pkg", root)
    make_tree(root, {".gitignore": "generated/\n", "generated/old.py": "import torch\ntorch.ones(1).cuda()\n",
                     ".venv/pyvenv.cfg": "home = /usr\n", ".venv/lib/dep.py": "import torch\ntorch.ones(1).cuda()\n"})
    (root / "latin1.py").write_bytes(b"# caf\xe9\n")
    return root


def marked(path: Path, mark: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if f"# MARK: {mark}" in line)


def test_static_project_report_has_findings_per_file_and_root_relative_paths_in_json_and_sarif(tmp_path):
    root = copy_package(tmp_path)
    out = cli(["proj", "--static-only", "--format", "json"], tmp_path)
    assert out.returncode == 0, out.stderr
    report = __import__("json").loads(out.stdout)
    assert report["script"] == "proj"
    assert [f["path"] for f in report["files"] if "error" not in f] == ["pkg/__init__.py", "pkg/data.py", "pkg/model.py", "train.py"]
    assert "warning: skipped latin1.py" in out.stderr and any("latin1.py" in w for w in report["warnings"])
    where = {(f["path"], f["line"], f["rule"]) for f in report["findings"]}
    assert ("pkg/model.py", marked(root / "pkg/model.py", "module_cuda"), "NC101") in where
    assert all(not f["path"].startswith(("/", "proj", "generated", ".venv")) for f in report["findings"])
    assert report["verdict"] == "ready-with-fixes"
    sarif = __import__("json").loads(cli(["proj", "--static-only", "--format", "sarif"], tmp_path).stdout)
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
            for result in sarif["runs"][0]["results"] for loc in result["locations"]}
    assert uris <= {"pkg/model.py", "pkg/data.py", "train.py"} and "pkg/model.py" in uris


def test_project_diff_covers_every_file_and_applies_where_it_was_made(tmp_path):
    copy_package(tmp_path)
    out = cli(["proj", "--diff"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--- a/proj/pkg/model.py" in out.stdout and "+++ b/proj/pkg/model.py" in out.stdout
    (tmp_path / "fix.patch").write_text(out.stdout)
    check = subprocess.run(["git", "apply", "--check", "fix.patch"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


@pytest.mark.slow
def test_project_runtime_attributes_ops_to_the_imported_modules_lines_and_counts_their_remaps(tmp_path):
    root = copy_package(tmp_path)
    out = cli(["proj", "--device", "sim", "--format", "json"], tmp_path)
    assert out.returncode == 0, out.stderr
    report = __import__("json").loads(out.stdout)
    assert report["runtime"]["outcome"] == "stopped-steps", report["runtime"]
    ops = {r["op"]: r for r in report["ops"]}
    model, data = root / "pkg/model.py", root / "pkg/data.py"
    assert f"pkg/model.py:{marked(model, 'fc')}" in ops["aten.addmm.default"]["sites"]
    assert ops["aten.native_layer_norm.default"]["sites"] == [f"pkg/model.py:{marked(model, 'norm')}"]
    assert f"pkg/data.py:{marked(data, 'randn')}" in ops["aten.randn.default"]["sites"]
    remap = {(f["path"], f["line"]): f for f in report["findings"] if f["rule"] == "NCRT1"}
    module_cuda = remap[("pkg/model.py", marked(model, "module_cuda"))]
    assert module_cuda["message"].startswith("works by remap (Module.cuda() -> .to('sim')); fix: ")
    assert module_cuda["covered_by"] == "NC101" and module_cuda["effort"] == "none"
    randn = remap[("pkg/data.py", marked(data, "randn"))]
    assert randn["source_line"].strip().startswith("x = torch.randn(4, 8, device=DEVICE)")
    assert report["verdict"] == "ready-with-fixes"
    assert "NCRT1" in report["rules"]


def test_a_file_the_scanner_fails_on_is_an_error_row_and_the_report_stands(tmp_path, monkeypatch):
    """One file never sinks a project: whatever goes wrong inside the scan of one file (here an
    injected fault of the rule engine) becomes that file's error row."""
    import porting_cli.analysis.scan.checked as checked

    make_tree(tmp_path, {"train.py": "import torch\nx = torch.ones(1).cuda()\n",
                         "broken.py": "import torch\ny = torch.ones(1).cuda()  # trips the fault\n"})
    real = checked.analyze_checked

    def faulty(text, path="<string>"):
        if "trips the fault" in text:
            raise RecursionError("maximum recursion depth exceeded")
        return real(text, path)
    monkeypatch.setattr(checked, "analyze_checked", faulty)
    monkeypatch.setenv("NEURON_CHECK_NO_CACHE", "1")
    scanned = scan_project(discover(str(tmp_path)))
    rows = {f["path"]: f for f in scanned.files}
    assert "RecursionError" in rows["broken.py"]["error"]
    assert [(f.path, f.rule_id) for f in scanned.result.findings] == [("train.py", "NC101")]
