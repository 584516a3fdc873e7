"""Scanning many files fast: the content cache first, then the misses on a pool of processes.

It sits above porting_cli.analysis.scan and porting_cli.analysis.fix, whose results it combines.

Each file gives a ``FileScan``: its findings (``ScanResult``) and its patch (``FixResult``),
both from one analysis, or the ``ScanError`` that says why it could not be scanned. A file
whose text was scanned before (``porting_cli.analysis.scan.cache``) costs a hash and a JSON read and
never imports the rule families. The misses are analysed in this process when there are few of
them, else on ``jobs`` forked workers (the scan is imported once, before the fork; the process
pool only then).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from typing import Callable, Iterator, Sequence

from porting_cli.analysis.scan.cache import CachedScan, ScanCache
from porting_cli.analysis.scan.findings import ScanError, ScanResult
from porting_cli.analysis.scan.source import read_source

#: below this many lines to analyse, starting workers costs more than it saves
PARALLEL_MIN_LINES = 4000
#: the cyclic collector's first threshold while files are analysed (Python's default: 700).
#: Each file's tree is hundreds of thousands of new objects that live until the next file,
#: so at 700 the collector ran every few hundred nodes of the parse and scanned each node
#: again and again on its way to the oldest generation; the few cycles a file's analysis
#: leaves are small, and are still collected
GC_THRESHOLD = 50_000


@dataclasses.dataclass(frozen=True)
class ScanOptions:
    jobs: int = 0  # 0: one worker per CPU core this process may use
    cache: ScanCache | None = None  # None: ScanCache.default()

    def workers(self) -> int:
        if self.jobs > 0:
            return self.jobs
        try:
            return len(os.sched_getaffinity(0))  # taskset / cgroup limits, not the machine's count
        except (AttributeError, OSError):
            return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class FileScan:
    result: ScanResult
    fix: object  # porting_cli.analysis.fix.FixResult
    cached: bool


def _fix_result(path: str, text: str, cached: CachedScan):
    from porting_cli.analysis.fix import FixResult

    applied = [f for f in cached.findings if f.fixable]
    remaining = [f for f in cached.findings if not f.fixable]
    new_text = text if cached.fixed_text is None else cached.fixed_text
    return FixResult(new_text, applied, remaining, path, text, frozenset(cached.companion_lines))


def analyse(text: str, path: str) -> CachedScan | ScanError:
    """Scan and fix one text (the slow path: parse and rules); errors come back as values."""
    from porting_cli.analysis.fix import fix_source
    from porting_cli.analysis.scan.checked import analyze_checked

    try:
        analysis = analyze_checked(text, path)
        fixed = fix_source(text, path)
    except ScanError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - one file never sinks a project: it becomes an error row
        return ScanError(f"{path}: the scanner failed on this file ({type(exc).__name__}: {exc}); "
                         "please report it with the file")
    return CachedScan(analysis.lines, tuple(analysis.findings), fixed.new_text if fixed.changed else None,
                      tuple(sorted(fixed.companion_lines)))


def _analyse_item(item: tuple[bytes, str]) -> CachedScan | ScanError:
    return analyse(item[0].decode("utf-8"), item[1])


def scan_paths(items: Sequence[tuple[str, str]], options: ScanOptions = ScanOptions(),
               on_file: Callable[[], None] | None = None) -> list[FileScan | ScanError]:
    """``items`` are (file to read, path to report it as); one answer per item, in order.
    `on_file` is called once per item as it is done (a progress bar)."""
    done = on_file or (lambda: None)
    cache = options.cache if options.cache is not None else ScanCache.default()
    # the texts to analyse wait as UTF-8 (what the workers are sent anyway): a package's text
    # in str form takes twice its bytes and more (Transformers: 119 MB for 54 MB of files)
    texts: list[str | bytes | None] = []
    answers: list[CachedScan | ScanError | None] = []
    for file, shown in items:
        try:
            text = read_source(file)
        except ScanError as exc:
            texts.append(None)
            answers.append(exc)
            done()
            continue
        answers.append(cache.load(text, shown))
        if answers[-1] is not None:
            texts.append(text)
            done()
        else:
            texts.append(text.encode("utf-8"))
    hits = [isinstance(a, CachedScan) for a in answers]
    misses = [i for i, a in enumerate(answers) if a is None]
    for i, computed in zip(misses, _analyse_all([(texts[i], items[i][1]) for i in misses], options, done)):
        answers[i] = computed
        texts[i] = texts[i].decode("utf-8")
        if isinstance(computed, CachedScan):
            cache.store(texts[i], computed)
    out: list[FileScan | ScanError] = []
    for (_, shown), text, answer, hit in zip(items, texts, answers, hits):
        if isinstance(answer, ScanError):
            out.append(answer)
        else:
            result = ScanResult(path=shown, findings=list(answer.findings), lines=answer.lines)
            out.append(FileScan(result, _fix_result(shown, text, answer), hit))
    return out


@contextlib.contextmanager
def _collector_for_analysis() -> Iterator[None]:
    """The cyclic garbage collector set for analysing many files, as before afterwards.

    The objects alive now (the imported modules, the CLI's state) are moved out of the
    collector's reach (gc.freeze): every full collection had walked all of them again, and
    forked workers that walk them also copy the pages they sit in. The first threshold is
    raised to GC_THRESHOLD."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _analyse_all(work: list[tuple[bytes, str]], options: ScanOptions,
                 done: Callable[[], None]) -> list[CachedScan | ScanError]:
    """``work``: (UTF-8 text, path) of each file to analyse."""
    # imported before the freeze, and once for all forked workers
    import porting_cli.analysis.fix  # noqa: F401
    import porting_cli.analysis.scan.apply  # noqa: F401
    import porting_cli.analysis.scan.checked  # noqa: F401

    with _collector_for_analysis():
        return _analyse_with_workers(work, options, done)


def _analyse_with_workers(work: list[tuple[bytes, str]], options: ScanOptions,
                          done: Callable[[], None]) -> list[CachedScan | ScanError]:
    def one_by_one() -> list[CachedScan | ScanError]:
        answers = []
        for item in work:
            answers.append(_analyse_item(item))
            done()
        return answers

    jobs = min(options.workers(), len(work))
    if jobs < 2 or sum(data.count(b"\n") for data, _ in work) < PARALLEL_MIN_LINES:
        return one_by_one()
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return one_by_one()
    from concurrent.futures import ProcessPoolExecutor
    order = sorted(range(len(work)), key=lambda i: -len(work[i][0]))  # big files first: even finish
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            answers = []
            for answer in pool.map(_analyse_item, [work[i] for i in order], chunksize=1):
                answers.append(answer)
                done()
    except BrokenProcessPool:  # a worker died (killed, out of memory): one file never sinks the project
        answers = [_analyse_item(work[i]) for i in order]
    results: list[CachedScan | ScanError] = [None] * len(work)  # type: ignore[list-item]
    for i, answer in zip(order, answers):
        results[i] = answer
    return results
