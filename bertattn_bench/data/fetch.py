"""Download the manifest's files into a data folder: resumable (HTTP Range on a kept ``*.part`` file), atomic (the
``.part`` file is renamed to its name only after its size and sha256 match the manifest), retried on network and
server errors, with one progress bar over the bytes to fetch. A licence that restricts use is printed before its
corpus's first download. A mirror (``--mirror URL`` or ``$BERTATTN_DATA_MIRROR``) holds the data folder's own layout:
``URL/<corpus>/<path>``, e.g. a web server over a copy of a fetched folder, or ``file:///path/to/data``.
"""
from __future__ import annotations

import http.client
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import DataError
from ..base.settings import DATA_MIRROR_ENV as MIRROR_ENV  # noqa: F401 (re-exported)
from .manifest import PART_SUFFIX, Corpus, FileEntry, check_file, load_manifest, rebuild, sha256_file

USER_AGENT = "bertattn-bench-data-fetch"


class FetchError(DataError):
    """A file could not be downloaded (network or server error after the retries, an HTTP 4xx, no source)."""


class ChecksumError(DataError):
    """A downloaded file's bytes differ from the manifest: the message names the file and both digests."""


class _Incomplete(Exception):
    """The connection ended before the announced length (a truncated transfer): retried, resuming the part."""


@dataclass
class Options:
    mirror: str | None = None
    retries: int = 3  # further tries after a network/server error (each resumes the .part file)
    backoff: float = 1.0  # seconds before the first retry, doubled each time
    timeout: float = 60.0
    chunk: int = 1 << 16
    progress: bool | None = None  # None: a bar when stderr is a terminal (tqdm's disable=None)
    log: object = field(default=None)  # callable(str) for notes; default: a line on stderr

    def say(self, line: str) -> None:
        (self.log or (lambda s: print(s, file=sys.stderr, flush=True)))(line)


@dataclass
class Summary:
    present: list[str] = field(default_factory=list)  # already there with the right bytes
    fetched: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    failed: list[DataError] = field(default_factory=list)


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + PART_SUFFIX)


def _transfer(url: str, part: Path, entry: FileEntry, opts: Options, bar) -> bool:
    """Bring ``part`` to the whole file, resuming from its current length; True when it resumed a partial file."""
    have = part.stat().st_size if part.exists() else 0
    if have >= entry.size:  # complete already (or longer than it should be: the checksum decides)
        return have > 0
    headers = {"User-Agent": USER_AGENT}
    if have:
        headers["Range"] = f"bytes={have}-"
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=opts.timeout) as resp:
        status = getattr(resp, "status", 200)
        content_range = resp.headers.get("Content-Range", "")
        resumed = bool(have) and status == 206 and content_range.startswith(f"bytes {have}-")
        if have and not resumed:  # the server sent the whole file: start again
            bar.update(-have)
            have = 0
        length = resp.headers.get("Content-Length")
        announced = int(length) if length and length.isdigit() else None
        got = 0
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
    return resumed


def download(entry: FileEntry, dest_dir: Path, opts: Options, bar) -> None:
    """Fetch one file into ``dest_dir/entry.path`` (atomic: renamed after its checksum matches)."""
    url = entry.source_url(opts.mirror)
    if url is None:
        step = (entry.derived or {}).get("step", "")
        raise FetchError(f"{entry.path}: no public file to download (derived: {step}); fetch it from a mirror "
                         f"(--mirror URL or {MIRROR_ENV}) or copy it from a fetched data folder")
    dest = Path(dest_dir) / entry.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    failures = 0
    fresh_retry = False
    while True:
        try:
            resumed = _transfer(url, part, entry, opts, bar)
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
                return
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


def rebuild_file(entry: FileEntry, dest_dir: Path) -> None:
    """Write a derived file from its inputs (already fetched and checked), atomically and checked."""
    dest = Path(dest_dir) / entry.path
    data = rebuild(entry.derived["rule"], dest_dir, entry.derived["inputs"])
    part = part_path(dest)
    part.write_bytes(data)
    actual = sha256_file(part)
    if actual != entry.sha256 or len(data) != entry.size:
        part.unlink()
        raise ChecksumError(f"{entry.path}: checksum mismatch after the rebuild: expected sha256 {entry.sha256}, "
                            f"got {actual}; nothing was written")
    os.replace(part, dest)


def licence_note(corpus: Corpus) -> str:
    return f"NOTE: {corpus.name}: {corpus.restricted} (licence: {corpus.licence})"


def fetch(dest_dir: Path, only: list[str] | None = None, opts: Options | None = None) -> Summary:
    """Fetch the manifest's files (``only``: those corpora) into ``dest_dir``; files already there with the right
    bytes are kept. Each failure is recorded in the summary (the other files go on)."""
    from tqdm import tqdm

    opts = opts or Options()
    dest_dir = Path(dest_dir)
    corpora = load_manifest().select(only)
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
    total = sum(e.size for _, files in todo for e in files
                if not (e.derived and e.derived.get("rule") and not opts.mirror))
    disable = None if opts.progress is None else not opts.progress
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="data fetch", disable=disable,
              file=sys.stderr, leave=False) as bar:
        for corpus, files in todo:
            if corpus.restricted:
                bar.clear()
                opts.say(licence_note(corpus))
            rebuilds = [e for e in files if e.derived and e.derived.get("rule") and not opts.mirror]
            for entry in files:
                if entry in rebuilds:
                    continue
                try:
                    download(entry, dest_dir, opts, bar)
                    summary.fetched.append(entry.path)
                except DataError as exc:
                    summary.failed.append(exc)
            for entry in rebuilds:  # after their inputs
                try:
                    by_path = {e.path: e for e in corpus.files}
                    for need in entry.derived["inputs"]:
                        if check_file(dest_dir / need, by_path[need]) is not None:
                            raise FetchError(f"{entry.path}: not rebuilt: its input {need} is missing or differs")
                    rebuild_file(entry, dest_dir)
                    summary.rebuilt.append(entry.path)
                except (DataError, OSError) as exc:
                    summary.failed.append(exc if isinstance(exc, DataError) else FetchError(f"{entry.path}: {exc}"))
    return summary
