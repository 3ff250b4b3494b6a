"""Loopback stand-ins for the two hosts ``data fetch`` downloads from, serving their own URL layouts (127.0.0.1 only):

* the raw-file host: ``/<owner>/<name>/<commit>/<path>`` -> the bytes of that blob, taken from a data folder through
  the manifest (each file at its source path, and at each fallback source's path), with HTTP Range;
* the archive host: ``/<owner>/<name>/tar.gz/<commit>`` -> ``git archive --format=tar.gz --prefix=<name>-<commit>/``
  of a git snapshot (``SNAPSHOTS/<owner>+<name>/repo[/.git]``), streamed without a length as the real host does.

    python scripts/local_hosts.py --data ../shared/data --snapshots /work/.mirror --port 8765 --for 3600
    # prints: export BERTATTN_RAW_HOST=http://127.0.0.1:8765/raw BERTATTN_ARCHIVE_HOST=http://127.0.0.1:8765/archive

``--drop-first PATTERN``: answer a raw request whose path matches the glob with HTTP 404 (a first source that lost
its file), to show a fallback source serving. It stops by itself after ``--for`` seconds (default 2 hours).
"""
from __future__ import annotations

import argparse
import fnmatch
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from build_data_manifest import git_dir as snapshot  # noqa: E402 (the one reader of a snapshot folder's layout)


def raw_index(data_dir: Path) -> dict[str, Path]:
    """``owner/name/commit/path`` -> the data folder's file, for every manifest file with a source (and its
    fallbacks)."""
    from bertattn_bench.data.manifest import load_manifest

    index = {}
    for entry in load_manifest().files:
        local = data_dir / entry.path
        if entry.source_path is not None:
            index[f"{entry.repo}/{entry.commit}/{entry.source_path}"] = local
        for s in entry.fallbacks:
            index[f"{s.repo}/{s.commit}/{s.path}"] = local
    return index


class Hosts:
    """Both hosts on one loopback port: ``/raw/...`` and ``/archive/...``. ``requests`` logs (path, Range)."""

    def __init__(self, data_dir: Path, snapshots: Path | None = None, port: int = 0, drop_first: str | None = None):
        self.index = raw_index(Path(data_dir))
        self.snapshots, self.drop_first = snapshots, drop_first
        self.requests: list[tuple[str, str | None]] = []
        hosts = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = unquote(self.path)
                hosts.requests.append((path, self.headers.get("Range")))
                if path.startswith("/raw/"):
                    return self.raw(path[len("/raw/"):])
                if path.startswith("/archive/"):
                    return self.archive(path[len("/archive/"):])
                self.send_error(404)

            def raw(self, rel: str):
                local = hosts.index.get(rel)
                dropped = hosts.drop_first and fnmatch.fnmatchcase(rel, hosts.drop_first)
                if local is None or not local.is_file() or dropped:
                    self.send_error(404)
                    return
                data = local.read_bytes()
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes=") and rng.endswith("-"):
                    start = int(rng[6:-1])
                    if start >= len(data):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                self.wfile.write(data[start:])

            def archive(self, rel: str):
                parts = rel.split("/")
                if len(parts) != 4 or parts[2] != "tar.gz":
                    self.send_error(404)
                    return
                owner, name, _, commit = parts
                gdir = snapshot(hosts.snapshots, f"{owner}/{name}")
                if gdir is None:
                    self.send_error(404)
                    return
                proc = subprocess.Popen(["git", "--git-dir", str(gdir), "archive", "--format=tar.gz",
                                         f"--prefix={name}-{commit}/", commit], stdout=subprocess.PIPE)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-gzip")
                self.send_header("Connection", "close")  # no length: the end of the stream ends the body
                self.end_headers()
                try:
                    while block := proc.stdout.read(1 << 16):
                        self.wfile.write(block)
                finally:
                    proc.kill()
                    proc.wait()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.raw_url, self.archive_url = f"{base}/raw", f"{base}/archive"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.1,), daemon=True)

    def env(self) -> dict[str, str]:
        return {"BERTATTN_RAW_HOST": self.raw_url, "BERTATTN_ARCHIVE_HOST": self.archive_url}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="a data folder holding the manifest's files")
    parser.add_argument("--snapshots", type=Path, default=None, help="folder of git snapshots owner+name/repo")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--for", dest="seconds", type=float, default=7200.0, help="stop after this many seconds")
    parser.add_argument("--drop-first", default=None, help="glob of raw paths answered 404 (fallbacks then serve)")
    args = parser.parse_args()
    with Hosts(args.data, args.snapshots, args.port, args.drop_first) as hosts:
        print("export " + " ".join(f"{k}={v}" for k, v in hosts.env().items()), flush=True)
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            time.sleep(0.5)
        print(f"local_hosts: {len(hosts.requests)} requests served; stopping", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
