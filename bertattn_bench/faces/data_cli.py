"""``python -m bertattn_bench data list|fetch|verify``: the corpora the claims read, from their public sources.

  list   [--data-dir DIR]                      corpora, sizes, licences, the families that read them, and whether
                                               each is present under DIR (default: the data folder runs use)
  fetch  [--dest DIR] [--only CORPUS ...]      download (resumable, checked, retried) into DIR (default: the
         [--mirror URL] [--retries N]          default data folder); a mirror holds the data folder's layout
  verify DIR [--only CORPUS ...]               every manifest file under DIR: present, right size and sha256

Default data folder: $BERTATTN_DATA_HOME, else ${XDG_CACHE_HOME:-~/.cache}/bertattn-bench/data; runs read it when
neither --data-dir nor $BERTATTN_DATA_DIR is given. Mirror: --mirror or $BERTATTN_DATA_MIRROR (http(s):// or
file:// URL of a folder laid out like the data folder).

Exit status: 0 done; 1 a file differs from the manifest (verify, or a download whose checksum did not match);
3 a download failed (network or server error after the retries, no source); 4 a usage or input error.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..base.errors import DataError
from ..base.settings import DATA_DIR_ENV, default_data_home, env

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
    fetch.add_argument("--only", nargs="+", metavar="CORPUS", default=None, help="only these corpora")
    fetch.add_argument("--mirror", default=None, help="base URL of a mirror laid out like the data folder "
                                                      "(default: $BERTATTN_DATA_MIRROR, else the original hosts)")
    fetch.add_argument("--retries", type=int, default=3, help="further tries after a network error (default 3)")
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
        needs = ", ".join(c.needed_by) or "(no family)"
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
    from ..data.fetch import MIRROR_ENV, ChecksumError, Options, fetch
    from ..data.manifest import load_manifest

    if args.retries < 0:
        raise DataError(f"--retries {args.retries}: must be >= 0")
    load_manifest().select(args.only)  # an unknown corpus: a usage error before anything is written
    dest = Path(args.dest).expanduser() if args.dest else default_data_home()
    if dest.exists() and not dest.is_dir():
        raise DataError(f"--dest {dest}: is a file, not a folder")
    mirror = args.mirror or env(MIRROR_ENV) or None
    opts = Options(mirror=mirror, retries=args.retries, progress=False if args.no_progress else None)
    print(f"fetching into {dest}" + (f" from the mirror {mirror}" if mirror else " from the original hosts"),
          file=sys.stderr)
    dest.mkdir(parents=True, exist_ok=True)
    summary = fetch(dest, args.only, opts)
    for exc in summary.failed:
        print(f"ERROR: {exc}", file=sys.stderr)
    print(f"{len(summary.fetched)} fetched, {len(summary.rebuilt)} rebuilt, {len(summary.present)} already present, "
          f"{len(summary.failed)} failed, in {dest}")
    if not summary.failed:
        return OK
    return DIFFERS if all(isinstance(e, ChecksumError) for e in summary.failed) else FETCH_FAILED


def _verify(args) -> int:
    from ..data.manifest import load_manifest, verify

    folder = Path(args.dir).expanduser()
    if not folder.is_dir():
        raise DataError(f"{args.dir}: no such folder")
    load_manifest().select(args.only)
    entries, problems = verify(folder, args.only)
    for p in problems:
        print(f"ERROR: {p}", file=sys.stderr)
    size = sum(e.size for e in entries)
    corpora = len({e.corpus for e in entries})
    if problems:
        print(f"{len(problems)} of {len(entries)} files missing or different in {folder}")
        return DIFFERS
    print(f"verified {len(entries)} files ({_mb(size)}, {corpora} corpora) in {folder}: all match the manifest")
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
