"""``python -m bertattn_bench data list|fetch|verify``: the corpora the claims read, from their public sources.

  list   [--data-dir DIR]                      corpora, sizes, licences, the families that read them, and whether
                                               each is present under DIR (default: the data folder runs use)
  fetch  [--dest DIR] [--only CORPUS ...]      download (resumable, checked, retried, a few at once) into DIR
         [--all] [--mirror URL] [--retries N]  (default: the default data folder): the corpora a family reads,
         [--connections N]                     --only those named, --all every corpus; a mirror holds the data
                                               folder's layout
  verify DIR [--only CORPUS ...]               every manifest file under DIR: present, right size and sha256

Default data folder: $BERTATTN_DATA_HOME, else ${XDG_CACHE_HOME:-~/.cache}/bertattn-bench/data; runs read it when
neither --data-dir nor $BERTATTN_DATA_DIR is given. Mirror: --mirror or $BERTATTN_DATA_MIRROR (http(s):// or
file:// URL of a folder laid out like the data folder).

Every corpus's licence is printed before its first download; a file whose first source fails is tried at its
fallback sources; FrameNet's exemplar file is rebuilt from the per-commit archive of its source repository.

Exit status: 0 done; 1 verify found a file missing or different from the manifest; 3 fetch did not produce a
verified file (network or server error after the retries, no source, a checksum mismatch, a broken archive);
4 a usage or input error.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..base.errors import DataError
from ..base.settings import DATA_DIR_ENV, data_hosts, default_data_home, env

OK, DIFFERS, FETCH_FAILED, USAGE_ERROR = 0, 1, 3, 4


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and the usage-error status, as the other subcommands
        self.exit(USAGE_ERROR, f"ERROR: {self.prog}: {message} (see --help)\n")


def _parser() -> _Parser:
    parser = _Parser(prog="python -m bertattn_bench data", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    lst = sub.add_parser("list", help="corpora, sizes, licences, what needs them, present or missing")
    lst.add_argument("--data-dir", default=None, help=f"folder to look in (default: ${DATA_DIR_ENV}, else the "
                                                      "default data folder)")
    fetch = sub.add_parser("fetch", help="download the corpora (resumable, checked)")
    fetch.add_argument("--dest", default=None, help="data folder to fill (default: the default data folder)")
    which = fetch.add_mutually_exclusive_group()
    which.add_argument("--only", nargs="+", metavar="CORPUS", default=None, help="only these corpora")
    which.add_argument("--all", action="store_true", help="every corpus of the manifest (default: those a family "
                                                         "reads)")
    fetch.add_argument("--mirror", default=None, help="base URL of a mirror laid out like the data folder "
                                                      "(default: $BERTATTN_DATA_MIRROR, else the original hosts)")
    fetch.add_argument("--retries", type=int, default=3, help="further tries after a network error (default 3)")
    fetch.add_argument("--connections", type=int, default=None, help="downloads at once (default 6)")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    verify = sub.add_parser("verify", help="check a data folder against the manifest")
    verify.add_argument("dir", help="the data folder")
    verify.add_argument("--only", nargs="+", metavar="CORPUS", default=None, help="only these corpora")
    return parser


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _list(args) -> int:
    from ..data.manifest import load_manifest

    folder = Path(args.data_dir or env(DATA_DIR_ENV) or default_data_home()).expanduser()
    manifest = load_manifest()
    print(f"data folder: {folder}{'' if folder.is_dir() else ' (does not exist)'}")
    rows = []
    for c in manifest.corpora.values():
        here = sum((folder / f.path).is_file() and (folder / f.path).stat().st_size == f.size for f in c.files)
        status = "present" if here == len(c.files) else "missing" if here == 0 else f"partial {here}/{len(c.files)}"
        needs = ", ".join(c.needed_by) or "(no family: --only/--all)"
        rows.append((c.name, str(len(c.files)), _mb(c.size), status, needs, c.licence.split(";")[0][:60],
                     "non-commercial" if c.restricted and "non-commercial" in c.restricted else ""))
    header = ("corpus", "files", "size", "status", "needed by", "licence", "restriction")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    total = sum(c.size for c in manifest.corpora.values())
    print(f"{len(manifest.files)} files, {_mb(total)} in {len(manifest.corpora)} corpora "
          "(status: present with the manifest's size; `data verify DIR` checks the sha256)")
    return OK


def _fetch(args) -> int:
    from ..data.fetch import CONNECTIONS, MIRROR_ENV, Options, fetch, summary_lines
    from ..data.manifest import Hosts, load_manifest

    if args.retries < 0:
        raise DataError(f"--retries {args.retries}: must be >= 0")
    if args.connections is not None and args.connections < 1:
        raise DataError(f"--connections {args.connections}: must be >= 1")
    load_manifest().select(args.only)  # an unknown corpus: a usage error before anything is written
    dest = Path(args.dest).expanduser() if args.dest else default_data_home()
    if dest.exists() and not dest.is_dir():
        raise DataError(f"--dest {dest}: is a file, not a folder")
    mirror = args.mirror or env(MIRROR_ENV) or None
    opts = Options(mirror=mirror, hosts=Hosts.of(*data_hosts()), retries=args.retries,
                   connections=args.connections or CONNECTIONS, progress=False if args.no_progress else None)
    hosts = "the original hosts" if opts.hosts == Hosts() else f"{opts.hosts.raw} and {opts.hosts.archive}"
    print(f"fetching into {dest}" + (f" from the mirror {mirror}" if mirror else f" from {hosts}"), file=sys.stderr)
    dest.mkdir(parents=True, exist_ok=True)
    summary = fetch(dest, args.only, opts, everything=args.all)
    for exc in summary.failed:
        print(f"ERROR: {exc}", file=sys.stderr)
    for line in summary_lines(summary):
        print(line)
    print(f"{len(summary.fetched)} fetched, {len(summary.rebuilt)} rebuilt, {len(summary.present)} already present, "
          f"{len(summary.failed)} failed, in {dest}")
    return FETCH_FAILED if summary.failed else OK


def _verify(args) -> int:
    from ..data.manifest import load_manifest, verify

    folder = Path(args.dir).expanduser()
    if not folder.is_dir():
        raise DataError(f"{args.dir}: no such folder")
    manifest = load_manifest()
    chosen = manifest.select(args.only)
    # without --only: what a plain `data fetch` fills (the corpora a family reads) must be whole; a corpus no family
    # reads is checked where any of its files is there, and named as not fetched where none is (issue 62)
    absent = [] if args.only else [c for c in chosen if not c.default
                                   and not any((folder / f.path).exists() for f in c.files)]
    names = [c.name for c in chosen if c not in absent]
    entries, problems = verify(folder, names) if names else ([], [])
    for p in problems:
        print(f"ERROR: {p}", file=sys.stderr)
    size = sum(e.size for e in entries)
    corpora = len({e.corpus for e in entries})
    for c in absent:
        print(f"not fetched: {c.name} ({len(c.files)} files; no family reads it: `data fetch --only {c.name}` or "
              f"--all fetches it)")
    if problems:
        print(f"{len(problems)} of {len(entries)} files missing or different in {folder}")
        return DIFFERS
    print(f"verified {len(entries)} files ({_mb(size)}, {corpora} corpora) in {folder}: all match the manifest"
          + (f"; {len(absent)} corpus(es) no family reads not fetched" if absent else ""))
    return OK


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:  # --help (0) or a usage error (4, its line printed): a status, as the commands return
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    try:
        return {"list": _list, "fetch": _fetch, "verify": _verify}[args.command](args)
    except DataError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
