"""The transfers under :func:`.fetch.fetch`: one file downloaded into its ``.part`` file (resumed with HTTP Range,
retried on network and server errors, tried at its fallback sources in order) and renamed only after its size and
sha256 match the manifest; a per-commit archive streamed (never kept), its members extracted or fed to a rebuild
rule; a derived file rebuilt from its inputs. Every write is atomic and checked.
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
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import DataError
from ..base.settings import DATA_MIRROR_ENV as MIRROR_ENV
from .manifest import (
    PART_SUFFIX,
    Archive,
    FileEntry,
    Hosts,
    archive_rule,
    members_digest,
    rebuild,
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



class SharedBar:
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
