"""Download the manifest's files into a data folder: resumable (HTTP Range on a kept ``*.part`` file), atomic (the
``.part`` file is renamed to its name only after its size and sha256 match the manifest), retried on network and
server errors, a few connections at once under one progress bar over the bytes really to fetch. Every corpus's
licence (and notice) is said before its first download. A file whose first source fails is tried at its fallback
sources in order (the summary says which served it). A per-commit archive is streamed and never kept: its members
feed a rebuild rule (FrameNet's exemplar file) or are extracted as files; a broken stream restarts it cleanly.
A mirror (``--mirror URL`` or ``$BERTATTN_DATA_MIRROR``) holds the data folder's own layout:
``URL/<corpus>/<path>``, e.g. a web server over a copy of a fetched folder, or ``file:///path/to/data``.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import DataError
from ..base.settings import DATA_MIRROR_ENV as MIRROR_ENV  # noqa: F401 (re-exported)
from .manifest import (
    PART_SUFFIX,
    Archive,
    Corpus,
    FileEntry,
    Hosts,
    archive_rule,
    check_file,
    load_manifest,
    members_digest,
    missing_files,
    rebuild,
    require_data,
    sha256_file,
)

USER_AGENT = "bertattn-bench-data-fetch"
CONNECTIONS = 6  # downloads at once (a small pool: the hosts are shared)


class FetchError(DataError):
    """A file could not be fetched: network or server error after the retries, an HTTP 4xx, no source, a checksum
    that did not match, a broken archive. ``data fetch`` exits 3 for any of them."""


class ChecksumError(FetchError):
    """Downloaded or rebuilt bytes differ from the manifest: the message names the file and both digests."""


class _Incomplete(Exception):
    """The connection ended before the announced length (a truncated transfer): retried, resuming the part."""


_STREAM_ERRORS = (urllib.error.URLError, http.client.HTTPException, OSError, _Incomplete, tarfile.TarError, EOFError,
                  zlib.error)


@dataclass
class Options:
    mirror: str | None = None
    hosts: Hosts = field(default_factory=Hosts)
    retries: int = 3  # further tries after a network/server error (each resumes the .part file)
    backoff: float = 1.0  # seconds before the first retry, doubled each time
    timeout: float = 60.0
    chunk: int = 1 << 16
    connections: int = CONNECTIONS
    progress: bool | None = None  # None: a bar when stderr is a terminal (tqdm's disable=None)
    log: object = field(default=None)  # callable(str) for notes; default: a line on stderr
    home: Path | None = None  # the default data folder (a fetch command for it needs no --dest)

    def say(self, line: str) -> None:
        (self.log or (lambda s: print(s, file=sys.stderr, flush=True)))(line)


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


class _Bar:
    """One tqdm bar shared by the download threads (updates under a lock)."""

    def __init__(self, bar):
        self.bar, self.lock = bar, threading.Lock()

    def update(self, n: int) -> None:
        with self.lock:
            self.bar.update(n)

    def clear(self) -> None:
        with self.lock:
            self.bar.clear()


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + PART_SUFFIX)


def _transfer(url: str, part: Path, size: int, opts: Options, bar) -> tuple[bool, int]:
    """Bring ``part`` to the whole file, resuming from its current length: (resumed a partial file, bytes read)."""
    have = part.stat().st_size if part.exists() else 0
    if have >= size:  # complete already (or longer than it should be: the checksum decides)
        return have > 0, 0
    headers = {"User-Agent": USER_AGENT}
    if have:
        headers["Range"] = f"bytes={have}-"
    request = urllib.request.Request(url, headers=headers)
    got = 0
    with urllib.request.urlopen(request, timeout=opts.timeout) as resp:
        status = getattr(resp, "status", 200)
        content_range = resp.headers.get("Content-Range", "")
        resumed = bool(have) and status == 206 and content_range.startswith(f"bytes {have}-")
        if have and not resumed:  # the server sent the whole file: start again
            bar.update(-have)
            have = 0
        length = resp.headers.get("Content-Length")
        announced = int(length) if length and length.isdigit() else None
        with open(part, "ab" if resumed else "wb") as fh:
            while True:
                block = resp.read(opts.chunk)
                if not block:
                    break
                fh.write(block)
                got += len(block)
                bar.update(len(block))
        if announced is not None and got < announced:
            raise _Incomplete(f"the transfer ended after {have + got} of {have + announced} bytes")
    return resumed, got


def _download_from(url: str, entry: FileEntry, dest: Path, opts: Options, bar) -> int:
    """One source, with its retries: the file in place (atomic) or a FetchError/ChecksumError; bytes read."""
    part = part_path(dest)
    failures, fresh_retry, read = 0, False, 0
    while True:
        try:
            resumed, got = _transfer(url, part, entry.size, opts, bar)
            read += got
        except urllib.error.HTTPError as exc:
            if exc.code == 416:  # the range does not fit the server's file: start again
                part.unlink(missing_ok=True)
                error = exc
            elif 400 <= exc.code < 500:
                raise FetchError(f"{entry.path}: {url}: HTTP {exc.code} {exc.reason}") from None
            else:
                error = exc
        except (urllib.error.URLError, http.client.HTTPException, OSError, _Incomplete) as exc:
            error = exc
        else:
            actual = sha256_file(part)
            size = part.stat().st_size
            if size == entry.size and actual == entry.sha256:
                os.replace(part, dest)
                return read
            part.unlink()  # nothing that verify (or a resumed fetch) would take
            if resumed and not fresh_retry:  # a stale partial file: one fresh download
                fresh_retry = True
                continue
            raise ChecksumError(f"{entry.path}: checksum mismatch: expected sha256 {entry.sha256} "
                                f"({entry.size} bytes), got {actual} ({size} bytes) from {url}; "
                                "the download was deleted")
        failures += 1
        if failures > opts.retries:
            kept = f"; {part} is kept: fetch again to resume" if part.exists() and part.stat().st_size else ""
            tries = f"{failures} {'try' if failures == 1 else 'tries'}"
            raise FetchError(f"{entry.path}: download failed after {tries} from {url}: "
                             f"{str(error) or type(error).__name__}{kept}")
        time.sleep(opts.backoff * 2 ** (failures - 1))


def download(entry: FileEntry, dest_dir: Path, opts: Options, bar) -> tuple[str, int]:
    """Fetch one file into ``dest_dir/entry.path`` from its first source that works (atomic: renamed after its
    checksum matches): (the label of the source that served it, bytes read)."""
    sources = entry.sources(opts.mirror, opts.hosts)
    if not sources:
        step = (entry.derived or {}).get("step", "")
        raise FetchError(f"{entry.path}: no public file to download (derived: {step}); fetch it from a mirror "
                         f"(--mirror URL or {MIRROR_ENV}) or copy it from a fetched data folder")
    dest = Path(dest_dir) / entry.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    errors, read = [], 0
    for label, url in sources:
        try:
            return label, read + _download_from(url, entry, dest, opts, bar)
        except FetchError as exc:
            errors.append(exc)
            if len(errors) < len(sources):
                part_path(dest).unlink(missing_ok=True)  # the next source starts afresh
    if len(errors) == 1:
        raise errors[0]
    raise type(errors[-1])(f"{entry.path}: every source failed ({len(errors)}): "
                           + "; ".join(str(e).removeprefix(f"{entry.path}: ") for e in errors))


class _Counting:
    """A response stream that reports the bytes it hands out to the bar (and counts them)."""

    def __init__(self, raw, bar):
        self.raw, self.bar, self.count = raw, bar, 0

    def read(self, n: int = -1) -> bytes:
        block = self.raw.read(n)
        self.count += len(block)
        self.bar.update(len(block))
        return block


def _write_checked(entry: FileEntry, dest_dir: Path, data: bytes, how: str) -> None:
    """``data`` as ``entry``'s file: written to its ``.part``, checked, renamed (else a ChecksumError, nothing left)."""
    dest = Path(dest_dir) / entry.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    part.write_bytes(data)
    actual = hashlib.sha256(data).hexdigest()
    if actual != entry.sha256 or len(data) != entry.size:
        part.unlink()
        raise ChecksumError(f"{entry.path}: checksum mismatch {how}: expected sha256 {entry.sha256} "
                            f"({entry.size} bytes), got {actual} ({len(data)} bytes); nothing was written")
    os.replace(part, dest)


def fetch_archive(archive: Archive, entries: list[FileEntry], dest_dir: Path, opts: Options, bar) -> int:
    """Stream ``archive`` once (never stored): extract the ``entries`` taken from its members and build those derived
    from it; each file checked and renamed into place only after the whole archive was read and its members' digest
    matched. A broken stream (network, truncated or corrupt gzip/tar) restarts it from the start, ``opts.retries``
    times. Returns the bytes read."""
    url = archive.url(opts.hosts)
    extract = {e.member: e for e in entries if e.member is not None}
    derived = [e for e in entries if e.derived and e.derived.get("archive") == archive.name]
    failures, read = 0, 0
    while True:
        builders = {e.path: archive_rule(e.derived["rule"]) for e in derived}
        taken: dict[str, bytes] = {}
        digests: list[tuple[str, str]] = []
        stream = None
        try:
            request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(request, timeout=opts.timeout) as resp:
                stream = _Counting(resp, bar)
                with tarfile.open(fileobj=stream, mode="r|gz") as tar:
                    for member in tar:
                        if not member.isfile() or "/" not in member.name:
                            continue  # folders, and git's pax header of the commit id
                        name = member.name.split("/", 1)[1]  # below the archive's one top folder
                        wanted = archive.matches(name)
                        if not wanted and name not in extract:
                            continue
                        data = tar.extractfile(member).read()
                        if name in extract:
                            taken[name] = data
                        if wanted:
                            digests.append((name, hashlib.sha256(data).hexdigest()))
                            for builder in builders.values():
                                builder.add(name, data)
            read += stream.count
        except urllib.error.HTTPError as exc:
            if 400 <= exc.code < 500:
                raise FetchError(f"archive {archive.name}: {url}: HTTP {exc.code} {exc.reason}") from None
            error = exc
        except _STREAM_ERRORS as exc:
            error = exc
        else:
            break
        if stream is not None:
            read += stream.count
            bar.update(-stream.count)  # the next try reads it all again
        failures += 1
        if failures > opts.retries:
            tries = f"{failures} {'try' if failures == 1 else 'tries'}"
            raise FetchError(f"archive {archive.name} ({archive.repo}@{archive.commit[:12]}): failed after {tries} "
                             f"from {url}: {str(error) or type(error).__name__}; nothing was kept")
        time.sleep(opts.backoff * 2 ** (failures - 1))
    got = members_digest(digests)
    if len(digests) != archive.count or got != archive.members_sha256:
        raise ChecksumError(f"archive {archive.name} ({url}): {len(digests)} members matching {archive.members} "
                            f"with digest {got}; the manifest expects {archive.count} with {archive.members_sha256}; "
                            "nothing was written")
    missing = [m for m in extract if m not in taken]
    if missing:
        raise FetchError(f"archive {archive.name} ({url}): no member {missing[0]}; nothing was written")
    for member, entry in extract.items():
        _write_checked(entry, dest_dir, taken[member], f"(member {member} of {url})")
    for entry in derived:
        _write_checked(entry, dest_dir, builders[entry.path].result(), f"after the rebuild from {url}")
    return read


def rebuild_file(entry: FileEntry, dest_dir: Path) -> None:
    """Write a derived file from its inputs (already fetched and checked), atomically and checked."""
    data = rebuild(entry.derived["rule"], dest_dir, entry.derived["inputs"])
    _write_checked(entry, dest_dir, data, "after the rebuild")


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
        bar = _Bar(raw_bar)
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
