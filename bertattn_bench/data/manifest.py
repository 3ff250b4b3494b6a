"""The data manifest: every file the claim families read, where it comes from, its sha256 and size, licence and
citation, and which families and claims need it (``manifest.json`` beside this module, built by
``scripts/build_data_manifest.py``). Also: verifying a data folder against it, the files a family's corpus reads
(computed from the family modules' own path constants) and the start-up check that names a missing corpus.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from ..base.errors import DataError

MANIFEST_PATH = Path(__file__).with_name("manifest.json")
RAW_HOST = "https://raw.githubusercontent.com"  # one file of a repository at a commit: HOST/owner/name/COMMIT/PATH
ARCHIVE_HOST = "https://codeload.github.com"  # a repository's tree at a commit: HOST/owner/name/tar.gz/COMMIT
FETCH_COMMAND = "python -m bertattn_bench data fetch"
PART_SUFFIX = ".part"  # a download in progress: never a manifest path, so verify never accepts it


@dataclass(frozen=True)
class Hosts:
    """The base URLs of the two kinds of host the manifest's sources live on (the real ones by default; a test points
    them at loopback servers that serve the same URL layouts)."""

    raw: str = RAW_HOST
    archive: str = ARCHIVE_HOST

    @classmethod
    def of(cls, raw: str | None = None, archive: str | None = None) -> Hosts:
        """The real hosts, but for those named (``settings.data_hosts()`` gives the pair)."""
        return cls(raw or RAW_HOST, archive or ARCHIVE_HOST)

    def raw_url(self, repo: str, commit: str, path: str) -> str:
        return f"{self.raw.rstrip('/')}/{repo}/{commit}/{quote(path)}"

    def archive_url(self, repo: str, commit: str) -> str:
        return f"{self.archive.rstrip('/')}/{repo}/tar.gz/{commit}"


@dataclass(frozen=True)
class Source:
    """One public place a file's bytes can be downloaded from: ``path`` of ``repo`` at ``commit``."""

    repo: str
    commit: str
    path: str

    @property
    def label(self) -> str:
        return f"{self.repo}@{self.commit[:12]}"


@dataclass(frozen=True)
class Archive:
    """A repository's per-commit archive (tar.gz, one top folder), streamed and never kept: the members matching
    ``members`` (a glob over paths inside the repository) feed a rebuild rule or are extracted as files. The archive's
    own bytes are not stable (the host compresses it anew), so what is checked is its content: ``count`` members whose
    :func:`members_digest` is ``members_sha256``; each extracted file has its own sha256."""

    name: str
    repo: str
    commit: str
    members: str
    count: int
    members_sha256: str
    member_bytes: int  # the members' total size
    size_hint: int  # bytes of the archive as built from a snapshot (the progress bar's share; the host's may differ)
    checked: str = ""

    def url(self, hosts: Hosts) -> str:
        return hosts.archive_url(self.repo, self.commit)

    def matches(self, member: str) -> bool:
        return fnmatch.fnmatchcase(member, self.members)


def members_digest(pairs) -> str:
    """The digest of a set of archive members: sha256 over ``"<path>\t<sha256 of its bytes>\n"`` lines sorted by path
    (independent of the order the archive lists them in)."""
    h = hashlib.sha256()
    for name, digest in sorted(pairs):
        h.update(f"{name}\t{digest}\n".encode("utf-8"))
    return h.hexdigest()


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the data folder, POSIX
    size: int
    sha256: str
    corpus: str
    repo: str | None = None
    commit: str | None = None
    source_path: str | None = None  # path in ``repo`` at ``commit``; None for a derived file
    derived: dict | None = None  # {"rule", "inputs", "archive", "step"}
    checked: str = ""
    fallbacks: tuple[Source, ...] = ()  # further public copies of the same bytes, tried in order
    archive: str | None = None  # extracted from this archive of its corpus (``member`` inside it) instead
    member: str | None = None

    def sources(self, mirror: str | None = None, hosts: Hosts | None = None) -> list[tuple[str, str]]:
        """Where to download it, in order, as (label, URL): ``MIRROR/<path>`` alone when a mirror is given (a mirror
        holds the data folder's layout), else the pinned raw file of its repository, then each fallback; [] for a
        file that is rebuilt or extracted from an archive."""
        if mirror:
            return [("mirror", mirror.rstrip("/") + "/" + quote(self.path))]
        hosts = hosts or Hosts()
        first = [Source(self.repo, self.commit, self.source_path)] if self.source_path is not None else []
        return [(s.label, hosts.raw_url(s.repo, s.commit, s.path)) for s in [*first, *self.fallbacks]]

    def source_url(self, mirror: str | None = None, hosts: Hosts | None = None) -> str | None:
        """The first of :meth:`sources` (None when there is none)."""
        found = self.sources(mirror, hosts)
        return found[0][1] if found else None


@dataclass
class Corpus:
    name: str
    title: str
    licence: str
    restricted: str | None
    citation: str
    repo: str
    commit: str
    files: list[FileEntry] = field(default_factory=list)
    needed_by: dict = field(default_factory=dict)
    notice: str = ""  # said before the corpus's first download, with its licence
    archives: dict[str, Archive] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def default(self) -> bool:
        """Fetched by a plain ``data fetch``: a family reads it (the others only with ``--only`` / ``--all``)."""
        return bool(self.needed_by)


@dataclass
class Manifest:
    corpora: dict[str, Corpus]
    left_out: dict

    @property
    def files(self) -> list[FileEntry]:
        return [f for c in self.corpora.values() for f in c.files]

    def select(self, only: list[str] | None, everything: bool = True) -> list[Corpus]:
        """The corpora named in ``only``; when it is empty, all of them (``everything``) or those a family reads. An
        unknown name is a DataError naming the known ones."""
        if not only:
            return [c for c in self.corpora.values() if everything or c.default]
        unknown = [n for n in only if n not in self.corpora]
        if unknown:
            raise DataError(f"unknown corpus {', '.join(unknown)}; known: {', '.join(self.corpora)}")
        return [self.corpora[n] for n in dict.fromkeys(only)]


def parse_manifest(data: dict) -> Manifest:
    corpora = {}
    for name, c in data["corpora"].items():
        archives = {a: Archive(a, x.get("repo", c["repo"]), x.get("commit", c["commit"]), x["members"], int(x["count"]),
                               x["members_sha256"], int(x["member_bytes"]), int(x.get("size_hint", 0)),
                               x.get("checked", ""))
                    for a, x in c.get("archives", {}).items()}
        corpus = Corpus(name, c["title"], c["licence"], c.get("restricted"), c["citation"], c["repo"], c["commit"],
                        needed_by=c.get("needed_by", {}), notice=c.get("notice", ""), archives=archives)
        for f in c["files"]:
            derived = f.get("derived")
            archive = f.get("archive") or (derived or {}).get("archive")
            if archive is not None and archive not in archives:
                raise DataError(f"manifest: {f['path']} names the archive {archive!r}, which {name} does not define")
            corpus.files.append(FileEntry(
                f["path"], int(f["size"]), f["sha256"], name,
                repo=None if derived else f.get("repo", c["repo"]),
                commit=None if derived else f.get("commit", c["commit"]),
                source_path=f.get("source_path"), derived=derived, checked=f.get("checked", ""),
                fallbacks=tuple(Source(s["repo"], s["commit"], s["source_path"]) for s in f.get("fallbacks", [])),
                archive=f.get("archive"), member=f.get("member")))
        corpora[name] = corpus
    return Manifest(corpora, data.get("left_out", {}))


def manifest_from_text(text: str, where: str) -> Manifest:
    """The manifest parsed from its JSON text; a malformed one is a DataError naming ``where`` and the corpus entry
    (or the line, where it is not JSON), never a KeyError or TypeError from inside."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}:{exc.lineno}: not JSON ({exc.msg})") from None
    problems = (KeyError, TypeError, ValueError, AttributeError)
    try:
        return parse_manifest(data)
    except problems as exc:
        entry = "the top level"
        if isinstance(data, dict) and isinstance(data.get("corpora"), dict):
            for name, c in data["corpora"].items():
                try:
                    parse_manifest({"corpora": {name: c}})
                except problems:
                    entry = f"corpora/{name}"
                    break
        raise DataError(f"{where}: malformed data manifest at {entry} ({type(exc).__name__}: {exc})") from None


@lru_cache(maxsize=1)
def load_manifest() -> Manifest:
    text = resources.files("bertattn_bench.data").joinpath("manifest.json").read_text(encoding="utf-8")
    return manifest_from_text(text, "bertattn_bench/data/manifest.json")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


# --- derived files ------------------------------------------------------------------------------------------------

def _glue_mrpc_train(inputs: list[bytes]) -> bytes:
    """GLUE's ``download_glue_data.py`` ``format_mrpc``: the header line of msr_paraphrase_train.txt (its BOM kept),
    then every row whose (#1 ID, #2 ID) is not in dev_ids.tsv, tab-joined, ``\\n``-terminated."""
    train_text, ids_text = (b.decode("utf-8") for b in inputs)
    dev_ids = [row.strip().split("\t") for row in ids_text.splitlines()]
    lines = train_text.splitlines(keepends=True)
    out = [lines[0].rstrip("\r\n") + "\n"]
    for row in lines[1:]:
        label, id1, id2, s1, s2 = row.strip().split("\t")
        if [id1, id2] not in dev_ids:
            out.append(f"{label}\t{id1}\t{id2}\t{s1}\t{s2}\n")
    return "".join(out).encode("utf-8")


REBUILD_RULES = {"glue_mrpc_train": _glue_mrpc_train}


def rebuild(rule: str, data_dir: Path, inputs: list[str]) -> bytes:
    """The bytes of a derived file, from its input files (paths relative to ``data_dir``)."""
    return REBUILD_RULES[rule]([(Path(data_dir) / p).read_bytes() for p in inputs])


def archive_rule(rule: str):
    """A new builder for a derived file made from an archive's members: ``.add(member, data)`` for each member (any
    order), then ``.result()`` -> the file's bytes."""
    from .framenet_exemplars import ExemplarBuilder

    rules = {"framenet_lu_exemplars": ExemplarBuilder}
    if rule not in rules:
        raise DataError(f"manifest: unknown archive rule {rule!r} (known: {', '.join(rules)})")
    return rules[rule]()


# --- verify -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    path: str
    what: str  # "missing" | "size" | "sha256"
    expected: str = ""
    actual: str = ""

    def __str__(self) -> str:
        if self.what == "missing":
            return f"{self.path}: missing"
        return f"{self.path}: {self.what} mismatch: expected {self.expected}, got {self.actual}"


def check_file(path: Path, entry: FileEntry) -> Problem | None:
    """None when ``path`` holds exactly the manifest's bytes (size first: cheap)."""
    if not path.is_file():
        return Problem(entry.path, "missing")
    size = path.stat().st_size
    if size != entry.size:
        return Problem(entry.path, "size", str(entry.size), str(size))
    digest = sha256_file(path)
    if digest != entry.sha256:
        return Problem(entry.path, "sha256", entry.sha256, digest)
    return None


def verify(data_dir: Path, only: list[str] | None = None, progress=None) -> tuple[list[FileEntry], list[Problem]]:
    """(files checked, problems) of ``data_dir`` against the manifest (``only``: those corpora)."""
    entries = [f for c in load_manifest().select(only) for f in c.files]
    problems = []
    for entry in entries:
        problem = check_file(Path(data_dir) / entry.path, entry)
        if problem:
            problems.append(problem)
        if progress:
            progress(entry)
    return entries, problems


# --- what each family reads ---------------------------------------------------------------------------------------

KOBAYASHI_RANKS = "kobayashi_norms/rank_count_ids.txt"  # the norms family's frequency table (Kobayashi et al.)


def family_needs(family: str, corpus: str, manifest_paths=None) -> list[str]:
    """The data paths (files, or folders ending in ``/``) that ``family`` reads for ``corpus``, from the family
    modules' own constants; [] for a family that reads no data file. ``manifest_paths``: the manifest's file paths
    (GLUE's train split is needed where the manifest has one: QNLI has only dev)."""
    from . import arct_corpus as arct
    from . import blimp, glue, gum, litbank, segments, ud
    from . import coref_corpus as coref
    from . import framenet_corpus as framenet

    if manifest_paths is None:
        manifest_paths = {f.path for f in load_manifest().files}
    if family in ("dependency", "trees"):
        paths = [ud.CORPORA[corpus]]
    elif family == "trees_ft":  # + the MRPC fine-tune's train and dev (families/trees_ft.TASK)
        folder = f"{glue.GLUE_DIR}/{glue.TASKS['mrpc'].folder}"
        paths = [ud.CORPORA[corpus], f"{folder}/dev.tsv", f"{folder}/train.tsv"]
    elif family == "roles":  # + the WikiText-2 word counts of its rare-word heads
        paths = [ud.CORPORA[corpus], segments.CORPORA["wikitext2"]]
    elif family == "probes":
        base = corpus[:-3] if corpus.endswith("_ud") else corpus
        paths = [ud.CORPORA[base], gum.GUM_DOCUMENTS, *gum.SPLIT_FILES.values()]
    elif family in ("surface", "clustering", "gradient"):
        paths = [segments.CORPORA[corpus]]
    elif family == "norms":
        paths = [segments.CORPORA[corpus], KOBAYASHI_RANKS]
    elif family == "coref":
        is_litbank = coref.parse_corpus(corpus)[0] == "litbank"  # as coref.corpus_data_paths
        paths = [litbank.LITBANK_DOCUMENTS] if is_litbank else [gum.GUM_DOCUMENTS, *gum.SPLIT_FILES.values()]
    elif family in ("arct", "arct_ft"):
        paths = [*arct.ORIGINAL_FILES.values(), *arct.ADVERSARIAL_FILES.values(), arct.CLAIM_MAP, arct.RESULTS_DIR]
    elif family == "framenet":
        paths = [framenet.JSONL, f"{framenet.XML_DIR}/{framenet.EXAMPLE['file']}", framenet.FRAME_DIR]
    elif family == "explain" and corpus in ("blimp", "blimp-hard"):
        paths = list(blimp.FILES.values())
    elif corpus in glue.TASKS:  # the GLUE families (finetune, patterns, disable, prune, speedup): dev, and train
        folder = f"{glue.GLUE_DIR}/{glue.TASKS[corpus].folder}"  # where the manifest has one (QNLI: dev only)
        paths = [f"{folder}/dev.tsv"] + [p for p in (f"{folder}/train.tsv",) if p in manifest_paths]
        if family == "patterns":  # + the UD sentences of its linguistic features
            paths.append(ud.CORPORA[ud.FEATURES_CORPUS])
    else:
        return []
    # a path that is no manifest file is a folder: present when it holds a file
    return [p if p in manifest_paths else p.rstrip("/") + "/" for p in paths]


def _present(data_dir: Path, need: str) -> bool:
    path = data_dir / need.rstrip("/")
    if need.endswith("/"):
        return path.is_dir() and any(p.is_file() for p in path.rglob("*"))
    return path.is_file()


def missing_files(data_dir: Path, targets) -> dict[str, list[str]]:
    """{data corpus: [missing paths]} for the (family, corpus) pairs of a run, under ``data_dir`` (presence only:
    ``data verify`` checks the bytes)."""
    missing: dict[str, list[str]] = {}
    for family, corpus in dict.fromkeys(targets):
        try:
            needs = family_needs(family, corpus)
        except KeyError:  # a corpus the family modules do not name (a test's own): nothing to check here
            needs = []
        for need in needs:
            if not _present(Path(data_dir), need):
                owner = need.split("/")[0]
                if need not in missing.setdefault(owner, []):
                    missing[owner].append(need)
    return missing


def fetch_command(data_dir: Path, corpora: list[str], home: Path | None = None) -> str:
    """The command that fetches ``corpora`` into ``data_dir`` (``--dest`` unless it is ``home``, the default data
    folder the run's face named)."""
    dest = "" if home is not None and Path(data_dir).resolve() == Path(home).resolve() else f" --dest {data_dir}"
    return f"{FETCH_COMMAND}{dest} --only {' '.join(corpora)}"


def require_data(data_dir: Path, targets, home: Path | None = None) -> None:
    """A DataError of one line when a corpus the run reads is missing: the corpus, the folder searched, the fetch
    command."""
    missing = missing_files(data_dir, targets)
    if not missing:
        return
    names = list(missing)
    first = missing[names[0]][0]
    raise DataError(f"missing corpus {', '.join(names)} (e.g. {first}) in the data folder {data_dir}; "
                    f"fetch it with: {fetch_command(data_dir, names, home)}")
