"""Every `neuron-check` example of the README and of docs/*.md runs and does what the page says.

One test per page (`-k porting` picks a page): its example blocks run in document order in a
fresh folder (tests/docs/doc_examples.py holds the convention and the runner); two pages run at
once. Blocks marked
`skip` never run; blocks marked `slow` run only with NEURON_CHECK_DOCS_SLOW=1.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: the helper module
from doc_examples import (  # noqa: E402
    Example,
    MarkerError,
    console_steps,
    doc_pages,
    example_env,
    examples_in,
    missing_keys,
    output_matches,
    page_folder,
    parse_markers,
    run_example,
    shared_seed_database,
)

ROOT = Path(__file__).resolve().parents[2]
RUN_SLOW = os.environ.get("NEURON_CHECK_DOCS_SLOW") == "1"
# Pages run at once in one process (see page_runs): two on a 2-core machine. Under pytest-xdist
# each page is a unit of work of its own (tests/conftest.py) and runs on the worker given it.
PAGE_WORKERS = min(2, os.cpu_count() or 1)
TIMEOUT_S = 600 if RUN_SLOW else 90
PAGES = [p for p in doc_pages(ROOT) if examples_in(p, ROOT)]


@pytest.fixture(scope="session")
def seeded_db(tmp_path_factory) -> Path:
    """A results database holding one small sim run, for examples that read runs: one for the
    whole run, in the run's folder (tests/conftest.py) that every xdist worker sees, since
    pages run on every worker."""
    env = example_env(dict(os.environ), str(Path(sys.executable).parent))
    run_root = os.environ.get("NEURON_CHECK_TESTS_RUN_ROOT")
    folder = Path(run_root, "docs-seed") if run_root else tmp_path_factory.mktemp("seed")
    return shared_seed_database(folder, env)


def _run_page(page: Path, folder: Path, seed: Path) -> tuple[list[str], list[str]]:
    """Every runnable example of `page`, in document order, in `folder`: (lines to print, failures)."""
    runnable = [e for e in examples_in(page, ROOT) if not e.skip and (RUN_SLOW or not e.slow)]
    page_folder(folder, ROOT, seed)
    env = example_env(dict(os.environ), str(Path(sys.executable).parent))
    shown, failures = [], []
    for example in runnable:
        outcome = run_example(example, folder, env, TIMEOUT_S)
        shown.append(f"{example.where}: {'ok' if outcome.ok else 'FAILED'} in {outcome.seconds:.1f} s")
        if not outcome.ok:
            failures.append(f"{example.where} ({example.language} block):\n{outcome.detail}")
    return shown, failures


class LazyPages(dict):
    """page -> a finished future of _run_page, run on first lookup (the xdist case of page_runs)."""

    def __init__(self, tmp_path_factory, seed: Path) -> None:
        super().__init__()
        self._tmp, self._seed = tmp_path_factory, seed

    def __contains__(self, page: object) -> bool:
        return any(not e.skip and (RUN_SLOW or not e.slow) for e in examples_in(page, ROOT))

    def __missing__(self, page: Path) -> Future:
        done: Future = Future()
        done.set_result(_run_page(page, self._tmp.mktemp("page"), self._seed))
        self[page] = done
        return done


@pytest.fixture(scope="session")
def page_runs(request, tmp_path_factory, seeded_db: Path):
    """The selected pages' examples, PAGE_WORKERS pages at a time from the first page test on:
    {page: future of _run_page}. A page's commands mostly keep one core busy (a parent, then one
    worker, or a wait), and pages share nothing but the seed they copy, so two pages at once
    use the second core; each page still runs its blocks in order in a folder of its own."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Under xdist each page is a unit of work of its own (tests/conftest.py), sent to either
        # worker: a page runs when its test does, on the worker that got it.
        yield LazyPages(tmp_path_factory, seeded_db)
        return
    pages = [item.callspec.params["page"] for item in request.session.items
             if getattr(item, "originalname", None) == "test_page_examples_run"]
    runnable = [page for page in pages if any(not e.skip and (RUN_SLOW or not e.slow) for e in examples_in(page, ROOT))]
    with ThreadPoolExecutor(max_workers=PAGE_WORKERS) as pool:
        futures = {page: pool.submit(_run_page, page, tmp_path_factory.mktemp("page"), seeded_db) for page in runnable}
        try:
            yield futures
        finally:
            for future in futures.values():
                future.cancel()


@pytest.mark.timeout(3600 if RUN_SLOW else 900)
@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_page_examples_run(page: Path, page_runs):
    if page not in page_runs:
        pytest.skip("every example on this page is marked skip or slow")
    shown, failures = page_runs[page].result()
    print("\n".join(shown))
    assert not failures, "\n\n".join(failures)


def test_every_example_is_run_or_says_why_not():
    """Markers are well formed, and a block is left unrun only with a reason."""
    examples = [e for page in doc_pages(ROOT) for e in examples_in(page, ROOT)]
    assert examples, "no examples found: the parser lost them"
    for example in examples:
        assert example.language in ("bash", "console", "json")
        assert not (example.skip and example.slow), f"{example.where}: skip or slow, not both"


# -- the convention itself -------------------------------------------------------------------

def test_markers_parse_and_refuse_what_they_do_not_define():
    assert parse_markers("exit 2; slow 2 min on 2 cores", "p:1") == {"exit": "2", "slow": "2 min on 2 cores"}
    for bad in ("skip", "exit two", "expect 3", "slow"):
        with pytest.raises(MarkerError, match="p:1"):
            parse_markers(bad, "p:1")


def test_blocks_are_examples_only_when_they_run_neuron_check(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- example: exit 1 -->\n```bash\nneuron-check gate --baseline b.json\n```\n\n"
        "```bash\npython -m pytest  # neuron-check is mentioned only in a comment\n```\n\n"
        "<!-- example: skip needs a Trainium host -->\n"
        "```bash\ntimeout 5 neuron-check ops --device neuron\n```\n\n"
        "```console\n$ neuron-check runs\nid ...\n```\n\n"
        "```text\nneuron-check ops\n```\n", encoding="utf-8")
    found = examples_in(page, tmp_path)
    assert [(e.line, e.language, e.exit, e.skip) for e in found] == [
        (2, "bash", 1, None), (11, "bash", 0, "needs a Trainium host"), (15, "console", 0, None)]


def test_a_marker_must_sit_right_before_an_example(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- example: exit 1 -->\nsome prose\n```bash\nneuron-check runs\n```\n", encoding="utf-8")
    with pytest.raises(MarkerError, match="page.md:2"):
        examples_in(page, tmp_path)


def test_console_output_is_compared_with_wildcards():
    steps = console_steps('$ neuron-check runs --db x.db\nneuron-check: error: ...\n$ echo "exit $?"\nexit 2\n')
    assert [s.command for s in steps] == ["neuron-check runs --db x.db", 'echo "exit $?"']
    assert output_matches(("...", "run ... interrupted", "exit 143"), "a\nb\nrun 3 interrupted\nexit 143\n")
    assert output_matches(("...", "exit 143"), "exit 143\n")
    assert not output_matches(("...", "exit 143"), "exit 124\n")  # the README's old interrupt example
    assert not output_matches(("exit 143",), "exit 143\nmore\n")
    assert output_matches(("a  MISMATCH ... differ",), "a      MISMATCH  207/1556 values differ\n")
    assert not output_matches(("a MISMATCH",), "aMISMATCH\n")


def test_a_failing_example_is_caught(tmp_path):
    env = example_env(dict(os.environ), str(Path(sys.executable).parent))
    wrong_status = Example("p.md", 1, "bash", "true\nfalse", exit=0)
    assert not run_example(wrong_status, tmp_path, env, 30).ok
    early_failure = Example("p.md", 1, "bash", "false\nfalse", exit=1)  # the non-last command failed
    outcome = run_example(early_failure, tmp_path, env, 30)
    assert not outcome.ok and "before the last" in outcome.detail
    wrong_output = Example("p.md", 1, "console", "$ echo 124\n143")
    assert not run_example(wrong_output, tmp_path, env, 30).ok
    assert run_example(Example("p.md", 1, "console", "$ echo 143; exit 1\n143", exit=1), tmp_path, env, 30).ok


def test_shown_json_must_hold_only_keys_the_command_prints():
    shown = {"schema": 1, "run": {"id": 3, "...": "..."}, "results": [{"status": "PASS", "claimed": True}]}
    actual = {"schema": 1, "run": {"id": 1, "host": "h"}, "results": [{"status": "MISMATCH"}], "more": 1}
    assert missing_keys(shown, actual) == ["results[0].claimed"]
    assert missing_keys({"run": {"id": 3}}, actual) == []
    assert missing_keys({"results": [{"aten_ops": {"aten.mul.Tensor": 12}}]}, {"results": [{"aten_ops": {}}]}) == []


def test_an_example_past_its_time_limit_is_stopped_with_every_process_it_started(tmp_path):
    env = example_env(dict(os.environ), str(Path(sys.executable).parent))
    # the block's own child, as a neuron-check worker would be: bash alone dying would leave it running
    outcome = run_example(Example("p.md", 1, "bash", "sleep 120 & echo $! > child.pid\nwait"), tmp_path, env, 2)
    assert not outcome.ok and "still running after 2 s" in outcome.detail
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), f"process {child} of the stopped example is still running"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
