"""Build ``bertattn_bench/data/manifest.json`` from a prepared data folder (e.g. ../shared/data).

Sizes and sha256 digests are computed from the files; the source of each file (repository, commit, path) comes from
the rules below, written from each folder's ``SOURCE.md``. With ``--mirrors DIR`` (a folder of git snapshots named
``owner+name``, as the workplace's fetch tool lays them out: ``DIR/owner+name/repo[/.git]``), each file's git blob
id (``git hash-object``) is compared with the blob at the pinned commit and path (``git ls-tree``), and the result is
recorded per file in ``checked``. A mismatch stops the build.

    python scripts/build_data_manifest.py ../shared/data --mirrors /work/.mirror

The families each file serves are computed from the code (``bertattn_bench.data.manifest.family_needs``) and the
claims from the claims catalog, never typed in.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bertattn_bench.data.manifest import MANIFEST_PATH, archive_rule, family_needs, members_digest, rebuild, sha256_file  # noqa: E402

# corpus -> (repo, commit, [(local prefix, source prefix)] first match wins, {local file: override})
SPECS = {
    "ud_english_ewt": dict(
        notice="share alike: adaptations carry the same licence (CC BY-SA 4.0); attribution required",
        title="UD English EWT (English Web Treebank), dev and test",
        repo="UniversalDependencies/UD_English-EWT", commit="15d613d8447b3478787d4c278730a1e48a945efb",
        rules=[("", "")],
        licence="CC BY-SA 4.0", restricted=None,
        citation="Silveira et al. 2014, A Gold Standard Dependency Corpus for English (LREC); Universal Dependencies"),
    "ud_english_gum": dict(
        notice="attribution required; the texts keep their per-genre licences (LICENSE.txt)",
        title="UD English GUM, dev and test",
        repo="UniversalDependencies/UD_English-GUM", commit="afb41ee9bca57991125814fa04d96a0e61470c8b",
        rules=[("", "")],
        licence="CC BY-NC-SA 4.0 (treebank); per-genre text licences in LICENSE.txt",
        restricted="GUM is CC BY-NC-SA 4.0: non-commercial use only, share alike",
        citation="Zeldes 2017, The GUM Corpus: Creating Multilayer Resources in the Classroom (LRE 51(3))"),
    "ud_english_pud": dict(
        notice="share alike: adaptations carry the same licence (CC BY-SA 3.0); attribution required",
        title="UD English PUD (Parallel Universal Dependencies, CoNLL 2017 shared task test set)",
        repo="UniversalDependencies/UD_English-PUD", commit="f16eba4ae7f3d161870ed320676c5088b8fa476c",
        rules=[("", "")],
        licence="CC BY-SA 3.0", restricted=None,
        citation="Zeman et al. 2017, CoNLL 2017 Shared Task: Multilingual Parsing from Raw Text to Universal "
                 "Dependencies; Universal Dependencies"),
    "blimp_agreement": dict(
        notice="attribution required (CC BY 4.0): Warstadt et al. 2020",
        title="BLiMP: the six subject-verb agreement paradigms (1,000 minimal pairs each)",
        repo="alexwarstadt/blimp", commit="3e56b06fcabca9b30822fc66435fca6b1aa40bb1",
        rules=[("README.md", "README.md"), ("", "data/")],
        licence="CC BY 4.0", restricted=None,
        citation="Warstadt et al. 2020, BLiMP: The Benchmark of Linguistic Minimal Pairs for English (TACL 8)"),
    "gum": dict(
        notice="attribution required; the texts keep their per-genre licences (LICENSE.txt)",
        title="GUM per-document CoNLL-U files (all splits, with coreference)",
        repo="UniversalDependencies/UD_English-GUM", commit="afb41ee9bca57991125814fa04d96a0e61470c8b",
        rules=[("documents/", "not-to-release/sources/"), ("files.", "not-to-release/file-lists/files."),
               ("LICENSE.txt", "LICENSE.txt")],
        licence="CC BY-NC-SA 4.0 (treebank); per-genre text licences in LICENSE.txt",
        restricted="GUM is CC BY-NC-SA 4.0: non-commercial use only, share alike",
        citation="Zeldes 2017, The GUM Corpus: Creating Multilayer Resources in the Classroom (LRE 51(3))"),
    "gap_coreference": dict(
        notice="",
        title="GAP coreference (Mind the GAP)",
        repo="google-research-datasets/gap-coreference", commit="83135f26025cdd705c04f77e940d0c9201116b80",
        rules=[("", "")], licence="Apache-2.0", restricted=None,
        citation="Webster et al. 2018, Mind the GAP: A Balanced Corpus of Gendered Ambiguous Pronouns (TACL)"),
    "glue": dict(
        notice="the host is a personal repository holding GLUE's download; a second public copy is tried when it fails",
        title="GLUE tasks MRPC, STS-B, SST-2, RTE, QNLI (original GLUE TSV files)",
        repo="F0restL1n/BERT", commit="0d0288be08079531c7b3a85af3d532f9adb0f13a",
        rules=[("SST-2/SST_original_README.txt", "glue_data/SST-2/original/README.txt"), ("", "glue_data/")],
        overrides={
            "MRPC/Microsoft_Shared_Source_License_MRPC.htm": dict(
                repo="Nstats/my_bert", commit="733d79335044b1b7eabb5b47a0eae0cd621dadc0",
                path="data/MRPC/Microsoft Shared Source License.htm"),
            "MRPC/train.tsv": dict(derived=dict(
                rule="glue_mrpc_train", inputs=["glue/MRPC/msr_paraphrase_train.txt", "glue/MRPC/dev_ids.tsv"],
                step="GLUE download_glue_data.py format_mrpc: train = msr_paraphrase_train.txt minus the pairs of "
                     "dev_ids.tsv (4076 - 408 = 3668 rows; the host repository's train.tsv lacks one row)")),
        },
        licence="per task: MRPC Microsoft Research Shared Source License (non-commercial); STS-B scores CC BY-SA 4.0; "
                "SST-2 none stated; RTE none stated; QNLI from SQuAD (CC BY-SA 4.0)",
        restricted="MRPC: Microsoft Research Shared Source License, non-commercial use only; the GLUE tasks are for "
                   "research benchmarking, do not redistribute beyond their licences",
        citation="Wang et al. 2019, GLUE: A Multi-Task Benchmark and Analysis Platform for NLU (ICLR); "
                 "Dolan & Brockett 2005 (MRPC); Cer et al. 2017 (STS-B); Socher et al. 2013 (SST); "
                 "Dagan et al. 2006 et seq. (RTE); Rajpurkar et al. 2016 (SQuAD/QNLI)"),
    "litbank_coref": dict(
        notice="attribution required (CC BY 4.0)",
        title="LitBank coreference (CoNLL-2012 format)",
        repo="dbamman/litbank", commit="3e50db0ffc033d7ccbb94f4d88f6b99210328ed8",
        rules=[("conll/", "coref/conll/"), ("UPSTREAM_README.md", "README.md")],
        licence="CC BY 4.0", restricted=None,
        citation="Bamman, Lewke & Mansoor 2020, An Annotated Dataset of Coreference in English Literature (LREC)"),
    "wikitext2_raw": dict(
        notice="share alike: CC BY-SA 3.0 and GFDL (Wikipedia text); the host is a personal repository holding the WikiText-2 release",
        title="WikiText-2 (raw) test split",
        repo="Tylogi/TyloQuant", commit="7989d038b13ca737da11a95fb90e77ae059f33c0",
        rules=[("wiki.test.raw", "data/wikitext-2-raw/wiki.test.raw"),
               ("UPSTREAM_README.md", "data/wikitext-2-raw/README.md")],
        licence="CC BY-SA 3.0 (and GFDL)", restricted=None,
        citation="Merity et al. 2016, Pointer Sentinel Mixture Models"),
    "arct_original": dict(
        notice="Apache-2.0; NOTICE.txt lists the third-party licences",
        title="ARCT, Argument Reasoning Comprehension Task (SemEval-2018 Task 12)",
        repo="UKPLab/argument-reasoning-comprehension-task", commit="929f5847487e28036e60803f72e26a82c638db43",
        rules=[("LICENSE", "LICENSE"), ("NOTICE.txt", "NOTICE.txt"),
               ("", "mturk/annotation-task/data/exported-SemEval2018-train-dev-test/")],
        licence="Apache-2.0 (repository; NOTICE.txt lists third-party licences)", restricted=None,
        citation="Habernal et al. 2018, The Argument Reasoning Comprehension Task (NAACL)"),
    "arct_adversarial": dict(
        notice="no licence stated in the repository (the data is derived from ARCT, Apache-2.0): reuse at your own judgement",
        title="Adversarial ARCT and the authors' per-seed results",
        repo="IKMLab/arct2", commit="2eb4502f5a787665cae7195552cca74b05a0e900",
        rules=[("results_from_paper/", "results_from_paper/"), ("", "adversarial_dataset/")],
        licence="none stated (derived from ARCT, Apache-2.0)", restricted=None,
        citation="Niven & Kao 2019, Probing Neural Network Comprehension of Natural Language Arguments (ACL)"),
    "framenet_v15": dict(
        notice="FrameNet 1.5 was distributed by ICSI on application (free of charge for non-commercial use); this GitHub copy is an unofficial redistribution of that release; the exemplar file is rebuilt here from its LU files",
        title="FrameNet 1.5: frame definitions, LU exemplars (derived JSONL), sample XML",
        repo="dasmith/FrameNet-python", commit="b89d396c530c1e9a39c7978550472960b3bd9d26",
        rules=[("raw_xml_samples/", "fndata-1.5/"), ("", "fndata-1.5/")],
        overrides={"lu_exemplars_max15tok.jsonl": dict(derived=dict(
            rule="framenet_lu_exemplars", inputs=[], archive="lu",
            step="rebuilt from the per-commit archive of the source repository (streamed, not kept): every "
                 "fndata-1.5/lu/lu*.xml (11,829 files): per sentence and annotation set the rank-1 Target and FE "
                 "layers (end made exclusive), kept with >= 1 target span and >= 1 overt FE, sentence <= 15 "
                 "whitespace tokens and >= 1 Core/Core-Unexpressed FE span (framenet_v15/SOURCE.md); two order "
                 "choices: the records follow the LU files in file-name order as a directory listing sorts them "
                 "(lu10 before lu100), and each record's target spans (like its FEs) are sorted by start (the XML "
                 "lists 19 records' targets out of order); one compact JSON object per line, UTF-8 unescaped "
                 "(data.framenet.ExemplarBuilder)"))},
        archives={"lu": "fndata-1.5/lu/lu*.xml"},
        licence="FrameNet 1.5 data: free of charge for non-commercial use (ICSI); the repository's MIT licence "
                "covers its code only",
        restricted="FrameNet 1.5 may be used for non-commercial purposes only (ICSI's FrameNet 1.5 terms)",
        citation="Baker, Fillmore & Lowe 1998, The Berkeley FrameNet Project (COLING-ACL); "
                 "http://framenet.icsi.berkeley.edu"),
    "kobayashi_norms": dict(
        title="Kobayashi et al. 2021: WordPiece frequency ranks of BERT's uncased vocabulary",
        notice="no licence file at the pinned commit (the repository carried Apache-2.0 in earlier commits); cite "
               "Kobayashi et al. 2020 and 2021",
        repo="gorokoba560/norm-analysis-of-transformer", commit="5dc8fb3b541f696288dec46fbd610d97a1a1ade2",
        rules=[("rank_count_ids.txt", "emnlp2021/data/rank_count_ids.txt")],
        licence="none stated at the pinned commit (Apache-2.0 in the repository's commits of 2020-10 to 2021-09)",
        restricted=None,
        citation="Kobayashi, Kuribayashi, Yokoi & Inui 2020, Attention is Not Only a Weight (EMNLP); 2021, "
                 "Incorporating Residual and Normalization Layers into Analysis of Masked Language Models (EMNLP)"),
}
LEFT_OUT = {"SOURCE.md": "written in this workplace (no public source); docs/data.md carries their content"}


def git_dir(mirrors: Path | None, repo: str) -> Path | None:
    if mirrors is None:
        return None
    base = mirrors / repo.replace("/", "+") / "repo"
    for d in (base / ".git", base):
        if (d / "objects").is_dir():
            return d
    return None


def ls_tree(gdir: Path, commit: str) -> dict[str, str]:
    out = subprocess.run(["git", "--git-dir", str(gdir), "ls-tree", "-r", "-z", commit],
                         check=True, capture_output=True, text=True).stdout
    blobs = {}
    for entry in out.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            blobs[path] = meta.split()[2]
    return blobs


def blob_id(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def source_of(spec: dict, rel: str) -> dict:
    over = spec.get("overrides", {}).get(rel)
    if over:
        return dict(over)
    for local, remote in spec["rules"]:
        if rel.startswith(local) if local.endswith("/") or local == "" or local.endswith(".") else rel == local:
            return {"path": remote + rel[len(local):]}
    raise SystemExit(f"no source rule for {rel}")


def blobs(gdir: Path, ids: list[str]):
    """(id, bytes) of each git object, in order, through one ``git cat-file --batch``."""
    proc = subprocess.Popen(["git", "--git-dir", str(gdir), "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    for oid in ids:
        proc.stdin.write(f"{oid}\n".encode())
        proc.stdin.flush()
        size = int(proc.stdout.readline().split()[2])
        data = proc.stdout.read(size)
        proc.stdout.read(1)
        yield oid, data
    proc.stdin.close()
    proc.wait()


def archive_spec(gdir: Path | None, repo: str, commit: str, members: str, derived: list[dict], data_dir: Path,
                 previous: dict | None) -> dict:
    """An archive source from the repository's snapshot: its members' count, digest and bytes, the size of the
    per-commit archive as ``git archive`` builds it; each file derived from it rebuilt from the snapshot's members and
    checked against the data folder. Without a snapshot, the previous manifest's entry is kept."""
    import fnmatch

    if gdir is None:
        if previous is None:
            raise SystemExit(f"archive {members} of {repo}: no snapshot and no previous manifest entry")
        return previous
    tree = ls_tree(gdir, commit)
    names = sorted(n for n in tree if fnmatch.fnmatchcase(n, members))
    builders = {d["path"]: archive_rule(d["derived"]["rule"]) for d in derived}
    digests, total = [], 0
    for name, (_, data) in zip(names, blobs(gdir, [tree[n] for n in names])):
        digests.append((name, hashlib.sha256(data).hexdigest()))
        total += len(data)
        for b in builders.values():
            b.add(name, data)
    for path, b in builders.items():
        got = hashlib.sha256(b.result()).hexdigest()
        want = sha256_file(data_dir / path)
        if got != want:
            raise SystemExit(f"{path}: the rebuild from {repo}@{commit[:12]} gives {got}, the data folder's file {want}")
    name = repo.split("/")[1]
    archived = subprocess.run(f"git --git-dir {gdir} archive --format=tar.gz --prefix={name}-{commit}/ {commit} | wc -c",
                              shell=True, check=True, capture_output=True, text=True).stdout
    return {"members": members, "count": len(names), "members_sha256": members_digest(digests), "member_bytes": total,
            "size_hint": int(archived), "checked": f"members read from a snapshot of {repo} at {commit[:12]}; the "
                                                   "rebuilt file's sha256 equal to the data folder's"}


def previous_manifest(path: Path) -> dict:
    """The manifest as last written: its checks are kept for files whose bytes and source did not change when no
    snapshot is at hand this time."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"corpora": {}}


def build(data_dir: Path, mirrors: Path | None, fallbacks: dict | None = None, previous: dict | None = None) -> dict:
    corpora, trees = {}, {}
    previous = previous or {"corpora": {}}
    before = {f["path"]: f for c in previous["corpora"].values() for f in c["files"]}
    fallbacks = fallbacks or {}
    for name, spec in SPECS.items():
        folder = data_dir / name
        files, derived_by_archive = [], {}
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = f.relative_to(folder).as_posix()
            if f.name in LEFT_OUT:
                continue
            src = source_of(spec, rel)
            entry = {"path": f"{name}/{rel}", "size": f.stat().st_size, "sha256": sha256_file(f)}
            if "derived" in src:
                entry["derived"] = src["derived"]
                if src["derived"].get("archive"):
                    derived_by_archive.setdefault(src["derived"]["archive"], []).append(entry)
                    entry["checked"] = ("rebuilt by the rule from the archive's members (a snapshot of the repository "
                                        "at the pinned commit): sha256 equal to the data folder's file")
                elif src["derived"]["rule"]:
                    got = rebuild(src["derived"]["rule"], data_dir, src["derived"]["inputs"])
                    actual = hashlib.sha256(got).hexdigest()
                    if actual != entry["sha256"]:
                        raise SystemExit(f"{entry['path']}: the rebuild gives {actual}, the file is {entry['sha256']}")
                    entry["checked"] = "rebuilt from its inputs by the rule: sha256 equal to the data folder's file"
                else:
                    entry["checked"] = "not checked against a public source: derived from files outside the data folder"
                files.append(entry)
                continue
            repo, commit = src.get("repo", spec["repo"]), src.get("commit", spec["commit"])
            if repo != spec["repo"]:
                entry["repo"], entry["commit"] = repo, commit
            entry["source_path"] = src["path"]
            blob = blob_id(f)
            entry["git_blob"] = blob
            gdir = git_dir(mirrors, repo)
            old = before.get(entry["path"], {})
            if gdir is None:
                same = (old.get("git_blob") == blob and old.get("source_path") == src["path"]
                        and old.get("commit", spec["commit"]) == commit)
                entry["checked"] = old["checked"] if same and old.get("checked") else \
                    "not checked: no snapshot of the repository at hand"
            else:
                key = (repo, commit)
                if key not in trees:
                    trees[key] = ls_tree(gdir, commit)
                remote = trees[key].get(src["path"])
                if remote is None:
                    raise SystemExit(f"{entry['path']}: {src['path']} is not in {repo}@{commit}")
                if remote != blob:
                    raise SystemExit(f"{entry['path']}: git blob {blob} != {remote} of {repo}@{commit}:{src['path']}")
                entry["checked"] = f"git blob sha1 matched at commit {commit[:12]}"
            seconds = []
            for second in fallbacks.get(entry["path"], []):
                if second.get("git_blob") != blob:
                    raise SystemExit(f"{entry['path']}: the fallback {second['repo']} names blob "
                                     f"{second.get('git_blob')}, the file is {blob}")
                sdir = git_dir(mirrors, second["repo"])
                if sdir is not None:  # checked again here
                    out = subprocess.run(["git", "--git-dir", str(sdir), "ls-tree", second["commit"], "--",
                                          second["path"]], capture_output=True, text=True).stdout.split()
                    if len(out) < 3 or out[2] != blob:
                        raise SystemExit(f"{entry['path']}: {second['repo']}@{second['commit'][:12]}:{second['path']} "
                                         f"is not blob {blob}")
                elif not second.get("checked", second.get("verified")):
                    continue  # never checked against a snapshot: not a source
                seconds.append({"repo": second["repo"], "commit": second["commit"], "source_path": second["path"],
                                "checked": f"git blob sha1 matched at commit {second['commit'][:12]}"})
            if seconds:
                entry["fallbacks"] = seconds
            files.append(entry)
        corpora[name] = {k: spec[k] for k in ("title", "repo", "commit", "licence", "restricted", "citation")}
        corpora[name]["notice"] = spec.get("notice", "")
        if spec.get("archives"):
            old_archives = previous["corpora"].get(name, {}).get("archives", {})
            corpora[name]["archives"] = {
                a: archive_spec(git_dir(mirrors, spec["repo"]), spec["repo"], spec["commit"], members,
                                derived_by_archive.get(a, []), data_dir, old_archives.get(a))
                for a, members in spec["archives"].items()}
        corpora[name]["files"] = files
    return corpora


def needed_by(corpora: dict) -> dict:
    """Each corpus's families (family -> the family's corpora that read it), from the code; returns each family's
    claims (from the claims catalog)."""
    from bertattn_bench.claims.catalog import load_claims
    from bertattn_bench.claims.registry import families

    claims: dict[str, list[str]] = {}
    for c in load_claims():
        claims.setdefault(c.family, []).append(c.id)
    paths = {f["path"]: name for name, c in corpora.items() for f in c["files"]}
    for name in corpora:
        corpora[name]["needed_by"] = {}
    for fam in sorted(families().values(), key=lambda f: f.name):
        for corpus in fam.corpora:
            for need in family_needs(fam.name, corpus, paths):
                owner = need.split("/")[0]
                entry = corpora[owner]["needed_by"].setdefault(fam.name, [])
                if corpus not in entry:
                    entry.append(corpus)
    return {fam: sorted(ids) for fam, ids in sorted(claims.items())}


TABLE_BEGIN, TABLE_END = "<!-- manifest table: scripts/build_data_manifest.py --docs -->", "<!-- end manifest table -->"


def markdown_table(manifest: dict) -> str:
    """The corpora of the manifest as a Markdown table (docs/data.md): files, bytes, source, licence, families,
    how the files were checked, all read from the manifest."""
    from collections import Counter

    rows = ["| corpus | files | bytes | source (repository @ commit) | licence | restriction | needed by | checked |",
            "|---|---|---|---|---|---|---|---|"]
    for name, c in manifest["corpora"].items():
        repos = Counter(f.get("repo", c["repo"]) + " @ " + f.get("commit", c["commit"])[:12]
                        for f in c["files"] if "derived" not in f)
        checked = Counter(f["checked"] for f in c["files"])
        rows.append(" | ".join([
            f"| `{name}`", str(len(c["files"])), f"{sum(f['size'] for f in c['files']):,}",
            "; ".join(f"`{r}` ({n})" for r, n in repos.items()), c["licence"], c["restricted"] or "",
            ", ".join(f"`{fam}`" for fam in c["needed_by"]) or "(no family yet)",
            "; ".join(f"{text} ({n})" for text, n in checked.items())]) + " |")
    n = sum(len(c["files"]) for c in manifest["corpora"].values())
    size = sum(f["size"] for c in manifest["corpora"].values() for f in c["files"])
    rows.append(f"| **total** | **{n}** | **{size:,}** | | | | | |")
    return "\n".join(rows)


def write_docs(manifest: dict, doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    start, end = text.index(TABLE_BEGIN) + len(TABLE_BEGIN), text.index(TABLE_END)
    doc.write_text(text[:start] + "\n" + markdown_table(manifest) + "\n" + text[end:], encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, nargs="?", help="the prepared data folder (not needed with --docs)")
    parser.add_argument("--mirrors", type=Path, default=None, help="folder of git snapshots owner+name/repo")
    parser.add_argument("--fallbacks", type=Path, default=None,
                        help="JSON {data path: [{repo, commit, path, git_blob}]}: second public sources, each checked "
                             "(git blob) against a snapshot; kept only where the blob equals the file's")
    parser.add_argument("--out", type=Path, default=MANIFEST_PATH)
    parser.add_argument("--docs", type=Path, nargs="?", const=ROOT / "docs" / "data.md", default=None,
                        help="only rewrite the corpus table of docs/data.md from the written manifest")
    parser.add_argument("--needs-only", action="store_true",
                        help="only recompute needed_by and claims_by_family of the written manifest (after a family or "
                             "claim changed; needs no data folder)")
    args = parser.parse_args()
    if args.needs_only:
        manifest = json.loads(args.out.read_text(encoding="utf-8"))
        manifest["claims_by_family"] = needed_by(manifest["corpora"])
        args.out.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        write_docs(manifest, ROOT / "docs" / "data.md")
        return 0
    if args.docs:
        write_docs(json.loads(args.out.read_text(encoding="utf-8")), args.docs)
        return 0
    if args.data_dir is None:
        parser.error("name the data folder")
    fallbacks = json.loads(args.fallbacks.read_text(encoding="utf-8")) if args.fallbacks else {}
    previous = previous_manifest(args.out)
    if not fallbacks:  # keep the fallbacks already recorded
        fallbacks = {f["path"]: [{"repo": s["repo"], "commit": s["commit"], "path": s["source_path"],
                                  "git_blob": f.get("git_blob"), "checked": s["checked"]} for s in f.get("fallbacks", [])]
                     for c in previous["corpora"].values() for f in c["files"] if f.get("fallbacks")}
    corpora = build(args.data_dir, args.mirrors, fallbacks, previous)
    claims = needed_by(corpora)
    manifest = {"format": 1,
                "about": "Every data file the claim families read: source, sha256, size, licence, citation, and the "
                         "families and claims that need it. Built by scripts/build_data_manifest.py.",
                "left_out": LEFT_OUT, "claims_by_family": claims, "corpora": corpora}
    args.out.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n = sum(len(c["files"]) for c in corpora.values())
    size = sum(f["size"] for c in corpora.values() for f in c["files"])
    print(f"{args.out}: {len(corpora)} corpora, {n} files, {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
