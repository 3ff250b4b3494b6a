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

from bertattn_bench.data.manifest import MANIFEST_PATH, family_needs, rebuild, sha256_file  # noqa: E402

# corpus -> (repo, commit, [(local prefix, source prefix)] first match wins, {local file: override})
SPECS = {
    "ud_english_ewt": dict(
        title="UD English EWT (English Web Treebank), dev and test",
        repo="UniversalDependencies/UD_English-EWT", commit="15d613d8447b3478787d4c278730a1e48a945efb",
        rules=[("", "")],
        licence="CC BY-SA 4.0", restricted=None,
        citation="Silveira et al. 2014, A Gold Standard Dependency Corpus for English (LREC); Universal Dependencies"),
    "ud_english_gum": dict(
        title="UD English GUM, dev and test",
        repo="UniversalDependencies/UD_English-GUM", commit="afb41ee9bca57991125814fa04d96a0e61470c8b",
        rules=[("", "")],
        licence="CC BY-NC-SA 4.0 (treebank); per-genre text licences in LICENSE.txt",
        restricted="GUM is CC BY-NC-SA 4.0: non-commercial use only, share alike",
        citation="Zeldes 2017, The GUM Corpus: Creating Multilayer Resources in the Classroom (LRE 51(3))"),
    "gum": dict(
        title="GUM per-document CoNLL-U files (all splits, with coreference)",
        repo="UniversalDependencies/UD_English-GUM", commit="afb41ee9bca57991125814fa04d96a0e61470c8b",
        rules=[("documents/", "not-to-release/sources/"), ("files.", "not-to-release/file-lists/files."),
               ("LICENSE.txt", "LICENSE.txt")],
        licence="CC BY-NC-SA 4.0 (treebank); per-genre text licences in LICENSE.txt",
        restricted="GUM is CC BY-NC-SA 4.0: non-commercial use only, share alike",
        citation="Zeldes 2017, The GUM Corpus: Creating Multilayer Resources in the Classroom (LRE 51(3))"),
    "gap_coreference": dict(
        title="GAP coreference (Mind the GAP)",
        repo="google-research-datasets/gap-coreference", commit="83135f26025cdd705c04f77e940d0c9201116b80",
        rules=[("", "")], licence="Apache-2.0", restricted=None,
        citation="Webster et al. 2018, Mind the GAP: A Balanced Corpus of Gendered Ambiguous Pronouns (TACL)"),
    "glue": dict(
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
        title="LitBank coreference (CoNLL-2012 format)",
        repo="dbamman/litbank", commit="3e50db0ffc033d7ccbb94f4d88f6b99210328ed8",
        rules=[("conll/", "coref/conll/"), ("UPSTREAM_README.md", "README.md")],
        licence="CC BY 4.0", restricted=None,
        citation="Bamman, Lewke & Mansoor 2020, An Annotated Dataset of Coreference in English Literature (LREC)"),
    "wikitext2_raw": dict(
        title="WikiText-2 (raw) test split",
        repo="Tylogi/TyloQuant", commit="7989d038b13ca737da11a95fb90e77ae059f33c0",
        rules=[("wiki.test.raw", "data/wikitext-2-raw/wiki.test.raw"),
               ("UPSTREAM_README.md", "data/wikitext-2-raw/README.md")],
        licence="CC BY-SA 3.0 (and GFDL)", restricted=None,
        citation="Merity et al. 2016, Pointer Sentinel Mixture Models"),
    "arct_original": dict(
        title="ARCT, Argument Reasoning Comprehension Task (SemEval-2018 Task 12)",
        repo="UKPLab/argument-reasoning-comprehension-task", commit="929f5847487e28036e60803f72e26a82c638db43",
        rules=[("LICENSE", "LICENSE"), ("NOTICE.txt", "NOTICE.txt"),
               ("", "mturk/annotation-task/data/exported-SemEval2018-train-dev-test/")],
        licence="Apache-2.0 (repository; NOTICE.txt lists third-party licences)", restricted=None,
        citation="Habernal et al. 2018, The Argument Reasoning Comprehension Task (NAACL)"),
    "arct_adversarial": dict(
        title="Adversarial ARCT and the authors' per-seed results",
        repo="IKMLab/arct2", commit="2eb4502f5a787665cae7195552cca74b05a0e900",
        rules=[("results_from_paper/", "results_from_paper/"), ("", "adversarial_dataset/")],
        licence="none stated (derived from ARCT, Apache-2.0)", restricted=None,
        citation="Niven & Kao 2019, Probing Neural Network Comprehension of Natural Language Arguments (ACL)"),
    "framenet_v15": dict(
        title="FrameNet 1.5: frame definitions, LU exemplars (derived JSONL), sample XML",
        repo="dasmith/FrameNet-python", commit="b89d396c530c1e9a39c7978550472960b3bd9d26",
        rules=[("raw_xml_samples/", "fndata-1.5/"), ("", "fndata-1.5/")],
        overrides={"lu_exemplars_max15tok.jsonl": dict(derived=dict(
            rule=None, inputs=[],
            step="read every fndata-1.5/lu/lu*.xml of the source commit (11,829 files, not in the data folder): "
                 "rank-1 Target and FE layers per annotation set, kept with >= 1 target span and >= 1 overt FE, "
                 "sentence <= 15 whitespace tokens and >= 1 Core/Core-Unexpressed FE span (framenet_v15/SOURCE.md); "
                 "no rebuild is implemented: fetched from a mirror or copied"))},
        licence="FrameNet 1.5 data: free of charge for non-commercial use (ICSI); the repository's MIT licence "
                "covers its code only",
        restricted="FrameNet 1.5 may be used for non-commercial purposes only (ICSI's FrameNet 1.5 terms)",
        citation="Baker, Fillmore & Lowe 1998, The Berkeley FrameNet Project (COLING-ACL); "
                 "http://framenet.icsi.berkeley.edu"),
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


def build(data_dir: Path, mirrors: Path | None) -> dict:
    corpora, trees = {}, {}
    for name, spec in SPECS.items():
        folder = data_dir / name
        files = []
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = f.relative_to(folder).as_posix()
            if f.name in LEFT_OUT:
                continue
            src = source_of(spec, rel)
            entry = {"path": f"{name}/{rel}", "size": f.stat().st_size, "sha256": sha256_file(f)}
            if "derived" in src:
                entry["derived"] = src["derived"]
                if src["derived"]["rule"]:
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
            if gdir is None:
                entry["checked"] = "not checked: no snapshot of the repository at hand"
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
            files.append(entry)
        corpora[name] = {k: spec[k] for k in ("title", "repo", "commit", "licence", "restricted", "citation")}
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
    corpora = build(args.data_dir, args.mirrors)
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
