"""Download the manifest's files into a data folder: resumable (HTTP Range on a kept ``*.part`` file), atomic (the
``.part`` file is renamed to its name only after its size and sha256 match the manifest), retried on network and
server errors, a few connections at once under one progress bar over the bytes really to fetch. Every corpus's
licence (and notice) is said before its first download. A file whose first source fails is tried at its fallback
sources in order (the summary says which served it). A per-commit archive is streamed and never kept: its members
feed a rebuild rule (FrameNet's exemplar file) or are extracted as files; a broken stream restarts it cleanly.
A mirror (``--mirror URL`` or ``$BERTATTN_DATA_MIRROR``) holds the data folder's own layout:
``URL/<corpus>/<path>``, e.g. a web server over a copy of a fetched folder, or ``file:///path/to/data``.
The transfers themselves (one file, one archive, one rebuild) are :mod:`.transfer`; their names are here as well.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import DataError
from ..base.settings import DATA_MIRROR_ENV as MIRROR_ENV  # noqa: F401 (re-exported)
from .manifest import (
    Corpus,
    FileEntry,
    check_file,
    load_manifest,
    missing_files,
    require_data,
)
from .transfer import (
    CONNECTIONS,
    USER_AGENT,
    ChecksumError,
    FetchError,
    Options,
    SharedBar,
    download,
    fetch_archive,
    part_path,
    rebuild_file,
)

__all__ = ["CONNECTIONS", "USER_AGENT", "ChecksumError", "FetchError", "MIRROR_ENV", "Options", "CorpusStats",
           "Summary", "download", "ensure_data", "fetch", "fetch_archive", "licence_note", "part_path",
           "rebuild_file", "summary_lines"]


@dataclass
class CorpusStats:
    files: int = 0  # fetched, extracted or rebuilt
    bytes: int = 0  # downloaded (an archive counts as its compressed bytes)
    failed: int = 0
    started: float | None = None
    ended: float | None = None

    @property
    def seconds(self) -> float:
        return 0.0 if self.started is None or self.ended is None else self.ended - self.started


@dataclass
class Summary:
    present: list[str] = field(default_factory=list)  # already there with the right bytes
    fetched: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    failed: list[DataError] = field(default_factory=list)
    served: dict[str, str] = field(default_factory=dict)  # path -> the source that served it, where not the first
    corpora: dict[str, CorpusStats] = field(default_factory=dict)



def licence_note(corpus: Corpus, files: int | None = None, size: int | None = None, streamed: int = 0) -> str:
    """What is said before a corpus's first download: how much (files, MB, an archive streamed), its licence, what
    restricts it, its notice."""
    archive = f"; an archive of about {streamed / 1e6:.1f} MB streamed" if streamed else ""
    what = f" ({files} files, {size / 1e6:.1f} MB{archive})" if files is not None and size is not None else ""
    parts = [f"licence: {corpus.licence}"] + [p for p in (corpus.restricted, corpus.notice) if p]
    return f"NOTE: {corpus.name}{what}: " + "; ".join(parts)


def _is_rebuilt(entry: FileEntry, opts: Options) -> bool:
    return bool(entry.derived and entry.derived.get("rule") and not entry.derived.get("archive") and not opts.mirror)


def _from_archive(entry: FileEntry, opts: Options) -> str | None:
    if opts.mirror:
        return None
    return entry.archive or (entry.derived or {}).get("archive")


def fetch(dest_dir: Path, only: list[str] | None = None, opts: Options | None = None,
          everything: bool = False) -> Summary:
    """Fetch the manifest's files (``only``: those corpora; else those a family reads, or all with ``everything``)
    into ``dest_dir``; files already there with the right bytes are kept. Each failure is recorded in the summary
    (the other files go on)."""
    from tqdm import tqdm

    opts = opts or Options()
    dest_dir = Path(dest_dir)
    corpora = load_manifest().select(only, everything=everything)
    summary = Summary()
    todo: list[tuple[Corpus, list[FileEntry]]] = []
    for corpus in corpora:
        missing = []
        for entry in corpus.files:
            if check_file(dest_dir / entry.path, entry) is None:
                summary.present.append(entry.path)
            else:
                missing.append(entry)
        if missing:
            todo.append((corpus, missing))
    # the jobs: one per archive (its members and the files built from it), one per file, the local rebuilds last
    archive_jobs, file_jobs, rebuilds = [], [], []
    for corpus, files in todo:
        by_archive: dict[str, list[FileEntry]] = {}
        for entry in files:
            name = _from_archive(entry, opts)
            if name:
                by_archive.setdefault(name, []).append(entry)
            elif _is_rebuilt(entry, opts):
                rebuilds.append((corpus, entry))
            else:
                file_jobs.append((corpus, entry))
        archive_jobs += [(corpus, corpus.archives[name], entries) for name, entries in by_archive.items()]
    total = sum(e.size for _, e in file_jobs) + sum(a.size_hint for _, a, _ in archive_jobs)
    for corpus, files in todo:  # every licence before any download
        summary.corpora[corpus.name] = CorpusStats()
        streamed = sum(a.size_hint for c, a, _ in archive_jobs if c is corpus)
        opts.say(licence_note(corpus, len(files), sum(f.size for f in files), streamed))
    lock = threading.Lock()

    def run(corpus: Corpus, job, paths: list[str], derived: set[str]) -> None:
        """One job (it returns the fallback source that served it, or None, and the bytes read), recorded."""
        stats = summary.corpora[corpus.name]
        with lock:
            stats.started = stats.started or time.perf_counter()
        try:
            fallback, read = job()
        except DataError as exc:
            with lock:
                summary.failed.append(exc)
                stats.failed += len(paths)
        else:
            with lock:
                for p in paths:
                    (summary.rebuilt if p in derived else summary.fetched).append(p)
                    if fallback:
                        summary.served[p] = fallback
                stats.files += len(paths)
                stats.bytes += read
        finally:
            with lock:
                stats.ended = time.perf_counter()

    def file_job(entry: FileEntry):
        label, read = download(entry, dest_dir, opts, bar)
        return (None if label == entry.sources(opts.mirror, opts.hosts)[0][0] else label), read

    disable = None if opts.progress is None else not opts.progress
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="data fetch", disable=disable,
              file=sys.stderr, leave=False) as raw_bar:
        bar = SharedBar(raw_bar)
        with ThreadPoolExecutor(max_workers=max(1, opts.connections)) as pool:
            futures = [pool.submit(run, corpus, lambda a=archive, es=entries: (None, fetch_archive(a, es, dest_dir,
                                                                                                   opts, bar)),
                                   [e.path for e in entries], {e.path for e in entries if e.derived})
                       for corpus, archive, entries in archive_jobs]  # the longest first
            futures += [pool.submit(run, corpus, lambda e=entry: file_job(e), [entry.path], set())
                        for corpus, entry in sorted(file_jobs, key=lambda ce: -ce[1].size)]
            for f in futures:
                f.result()
    for corpus, entry in rebuilds:  # after their inputs
        stats = summary.corpora[corpus.name]
        try:
            by_path = {e.path: e for e in corpus.files}
            for need in entry.derived["inputs"]:
                if check_file(dest_dir / need, by_path[need]) is not None:
                    raise FetchError(f"{entry.path}: not rebuilt: its input {need} is missing or differs")
            rebuild_file(entry, dest_dir)
            summary.rebuilt.append(entry.path)
            stats.files += 1
        except (DataError, OSError) as exc:
            summary.failed.append(exc if isinstance(exc, DataError) else FetchError(f"{entry.path}: {exc}"))
            stats.failed += 1
    return summary


def summary_lines(summary: Summary) -> list[str]:
    """The per-corpus summary printed at the end: files, MB, seconds; and each file a fallback source served."""
    lines = []
    for name, s in summary.corpora.items():
        failed = f", {s.failed} failed" if s.failed else ""
        lines.append(f"  {name}: {s.files} files, {s.bytes / 1e6:.1f} MB in {s.seconds:.1f} s{failed}")
    for path, label in sorted(summary.served.items()):
        lines.append(f"  {path}: served by the fallback source {label}")
    return lines


def ensure_data(data_dir: Path, targets, opts: Options | None = None, may_fetch: bool = True) -> Summary | None:
    """Before a run: the corpora its (family, corpus) targets read, present in ``data_dir``. Where some are missing
    and ``may_fetch`` (the default data folder, not offline), they are fetched first; else, or when the fetch failed,
    a DataError of one line names the corpus, the folder and the fetch command."""
    from filelock import FileLock

    data_dir = Path(data_dir)
    summary = None
    if missing_files(data_dir, targets) and may_fetch:
        data_dir.mkdir(parents=True, exist_ok=True)
        # one fetch at a time into a folder (pytest-xdist workers start together): the others wait, then find it
        with FileLock(str(data_dir.parent / f".{data_dir.name}.fetch.lock")):
            missing = missing_files(data_dir, targets)
            if missing:
                opts = opts or Options()
                opts.say(f"data: {', '.join(missing)} not in the data folder {data_dir}: fetching "
                         f"(--offline or BERTATTN_OFFLINE=1 forbids it)")
                summary = fetch(data_dir, list(missing), opts)
                for line in summary_lines(summary):
                    opts.say(line)
                if summary.failed:
                    raise FetchError(f"could not fetch {', '.join(missing)} into {data_dir} "
                                     f"({len(summary.failed)} failed; first: {summary.failed[0]})")
    require_data(data_dir, targets, (opts or Options()).home)
    return summary
