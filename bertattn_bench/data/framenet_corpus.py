"""FrameNet 1.5 exemplar sentences (Kovaleva et al. 2019 §4.2): frame-evoking target and core frame-element spans.

Two readers give the same :class:`FrameRecord`: the derived ``framenet_v15/lu_exemplars_max15tok.jsonl`` (one
annotation set per line, character spans end-exclusive; see ``framenet_v15/SOURCE.md``) and FrameNet's own
lexical-unit XML (``framenet_v15/raw_xml_samples/lu/lu*.xml``: rank-1 ``Target`` and ``FE`` layers, inclusive
``end``, FE types from the LU header). FrameNet text is pre-tokenised (punctuation separated by spaces), so the
words are the whitespace tokens and a span covers every word it overlaps.

The paper's filters (§4.2, "Relation-specific heads in BERT"), applied in this order with n after each step:

1. sentences of at most 12 tokens ("we therefore filter out all the sentences longer than 12 tokens");
2. core frame elements only ("core frame elements", FE type ``Core``; ``Core-Unexpressed`` is a separate FrameNet
   type and is not counted; with it 8,527 records would remain instead of the 8,467 SOURCE.md reports);
3. frame elements of at most 3 tokens ("only the sentences with frame elements of 3 tokens or less");
4. target-FE distance of at least 2 tokens ("we exclude sentences where the linked objects are less than two
   tokens apart"): the minimum |i - j| over target words i and FE words j.

Filters 2-4 select frame elements; a record is kept when at least one core FE passes all three, and only those
FEs are linked to the target (the paper does not say whether a sentence with one too-close FE is dropped whole).
On FrameNet 1.5 this leaves 8,467 records (3,388 lexical units); the paper's 473 (FrameNet 1.7) must come from a
sample, so this corpus takes one seeded record per lexical unit ("sample sentences for every lexical unit").

**The default corpus, "notebook", is the authors' own pipeline** (text-machine-lab/dark-secrets-of-BERT,
``visualize_attention.ipynb``, section "7. BaseBERT study": ``exceeds_token_limit``, ``is_close`` and the annotation
loop), which differs from the reading above. Per annotation set, in the notebook's order:

1. the sentence has at most 12 ``word_tokenize`` tokens (Penn-Treebank tokens, :func:`treebank_tokens`);
2. the LU's target is a single span ("if target word appears many times");
3. **every** frame element span (any type) has at most 3 tokens, else the whole sentence goes;
4. the whole sentence goes if the target string is not a token of the sentence, or if any token within two
   positions of the target's first occurrence (the target included) equals, as a string, a token of any FE span;
5. the linked FEs are those named in the frame's ``FEcoreSets`` (frame XML; only 282 of 1,019 FrameNet 1.5 frames
   have core sets, the others give no example); a sentence with none goes. No sampling.

On the shipped FrameNet 1.5 exemplars this gives 21,355 -> 21,136 -> 15,598 -> 835 -> 439 sentences of 334 LUs
(the paper: 473 on FrameNet 1.7). The scoring on word pieces is in ``metrics/framenet.py``.
"""
from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from ..base.errors import DataError
from ..base.settings import data_file
from .framenet_exemplars import NS
from .json_lines import json_objects
from .treebank import word_tokens

FOLDER = "framenet_v15"
JSONL = f"{FOLDER}/lu_exemplars_max15tok.jsonl"
XML_DIR = f"{FOLDER}/raw_xml_samples/lu"
MAX_WORDS = 12  # Kovaleva §4.2
MAX_FE_WORDS = 3  # Kovaleva §4.2
MIN_DISTANCE = 2  # Kovaleva §4.2
CORE_TYPES = ("Core",)
SAMPLE_SEED = 0
# The paper's example (§4.2, Fig. 3): "He was becoming agitated" (agitated.a, Emotion_directed), read from the
# raw LU XML (lu8776.xml) and always part of the pass, so the claim about it never depends on the sample.
EXAMPLE = {"annoset_id": 1502691, "file": "lu8776.xml"}
FRAME_DIR = f"{FOLDER}/frame"
CORPORA = {
    "notebook": "the authors' notebook filters (visualize_attention.ipynb, BaseBERT study), every passing sentence",
    "one_per_lu": "one seeded record per lexical unit among those passing the filters",
    "all": "every record passing the filters",
}


@dataclass(frozen=True)
class FrameElement:
    name: str
    type: str | None  # Core / Peripheral / Extra-Thematic / Core-Unexpressed (None: not in the LU header)
    start: int  # characters, end exclusive
    end: int
    words: tuple[int, ...] = ()  # 0-based word indices the span overlaps


@dataclass
class FrameRecord:
    """One annotation set: a sentence with its frame-evoking target and frame elements."""

    annoset_id: int
    sent_id: int
    lu_id: int
    lu: str
    frame: str
    text: str
    words: list[str]
    target_words: tuple[int, ...]
    fes: list[FrameElement]
    source: str = ""  # "file:line" (JSONL) or "file, sentence ID" (XML)
    links: list[FrameElement] = field(default_factory=list)  # the core FEs that pass the filters
    target_spans: tuple[tuple[int, int], ...] = ()  # characters, end exclusive

    def link_pairs(self) -> list[tuple[int, int]]:
        """(target word, FE word) for every linked FE word; each pair once."""
        return sorted({(t, f) for fe in self.links for f in fe.words for t in self.target_words})


def _word_spans(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for w in text.split(" "):
        if w:
            spans.append((pos, pos + len(w)))
        pos += len(w) + 1
    return spans


def _covered(spans: list[tuple[int, int]], start: int, end: int) -> tuple[int, ...]:
    return tuple(k for k, (a, b) in enumerate(spans) if a < end and b > start)


def _record(where: str, text: str, target: list, fes: list, **ids) -> FrameRecord:
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: empty or missing sentence text")
    if "\n" in text or "\t" in text:
        raise DataError(f"{where}: sentence text holds a tab or line break (expected space-separated tokens)")
    spans = _word_spans(text)
    if not target:
        raise DataError(f"{where}: no target span")

    def check(start, end, what):
        if not (isinstance(start, int) and isinstance(end, int)) or not 0 <= start < end <= len(text):
            raise DataError(f"{where}: {what} span [{start}, {end}) is not inside the {len(text)}-character text")
        words = _covered(spans, start, end)
        if not words:
            raise DataError(f"{where}: {what} span [{start}, {end}) covers no word (only spaces)")
        return words

    target_words = tuple(sorted({w for s, e in target for w in check(s, e, "target")}))
    elements = [FrameElement(fe["name"], fe["type"], fe["start"], fe["end"],
                             check(fe["start"], fe["end"], f"frame element {fe['name']!r}")) for fe in fes]
    return FrameRecord(text=text, words=[text[a:b] for a, b in spans], target_words=target_words, fes=elements,
                       source=where, target_spans=tuple((int(s), int(e)) for s, e in target), **ids)


JSON_KEYS = ("lu_id", "lu", "frame", "sent_id", "annoset_id", "text", "target", "fes")


def read_jsonl(path: Path) -> list[FrameRecord]:
    """The derived exemplar file; a malformed line is an error naming the file, the line and the annotation set."""
    out = []
    for where, obj in json_objects(path):
        missing = [k for k in JSON_KEYS if k not in obj]
        if missing:
            raise DataError(f"{where}: missing key(s) {', '.join(missing)}")
        where = f"{where} (annoset {obj['annoset_id']})"
        target, fes = obj["target"], obj["fes"]
        if not isinstance(target, list) or not all(isinstance(s, list) and len(s) == 2 for s in target):
            raise DataError(f"{where}: 'target' must be a list of [start, end] pairs, got {target!r}")
        if not isinstance(fes, list) or not all(isinstance(f, dict) and {"name", "type", "start", "end"} <= set(f)
                                                for f in fes):
            raise DataError(f"{where}: 'fes' must be a list of {{name, type, start, end}} objects")
        out.append(_record(where, obj["text"], [tuple(s) for s in target], fes, annoset_id=int(obj["annoset_id"]),
                           sent_id=int(obj["sent_id"]), lu_id=int(obj["lu_id"]), lu=obj["lu"],
                           frame=obj["frame"]))
    return out


def read_lu_xml(path: Path) -> list[FrameRecord]:
    """One FrameNet 1.5 ``lu*.xml``: every annotation set with a rank-1 Target label and at least one spanned
    rank-1 FE label (as the JSONL was derived); XML ``end`` is inclusive, here end-exclusive."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, LookupError) as exc:  # LookupError: an unknown encoding in the XML declaration
        raise DataError(f"{path}: not well-formed XML ({exc})") from exc
    if root.tag != f"{NS}lexUnit":
        raise DataError(f"{path}: expected a FrameNet <lexUnit> document, got <{root.tag}>")
    try:
        lu_id, lu, frame = int(root.attrib["ID"]), root.attrib["name"], root.attrib["frame"]
    except (KeyError, ValueError) as exc:
        raise DataError(f"{path}: <lexUnit> lacks a valid ID/name/frame attribute ({exc})") from exc
    types = {fe.attrib.get("name"): fe.attrib.get("type") for fe in root.findall(f"{NS}header/{NS}frame/{NS}FE")}
    out = []
    for sent in root.iter(f"{NS}sentence"):
        text_el = sent.find(f"{NS}text")
        for aset in sent.findall(f"{NS}annotationSet"):
            where = f"{path}, sentence {sent.attrib.get('ID', '?')}, annotationSet {aset.attrib.get('ID', '?')}"
            layers = {ly.attrib.get("name"): ly for ly in aset.findall(f"{NS}layer") if ly.attrib.get("rank") == "1"}
            if "Target" not in layers or "FE" not in layers:
                continue

            def spans(layer):
                got = []
                for lab in layer.findall(f"{NS}label"):
                    if "start" not in lab.attrib:
                        continue  # null-instantiated FE (itype CNI/INI/DNI): no span
                    try:
                        got.append((lab.attrib.get("name"), int(lab.attrib["start"]), int(lab.attrib["end"]) + 1))
                    except (KeyError, ValueError) as exc:
                        raise DataError(f"{where}: label {lab.attrib.get('name')!r} has a bad start/end ({exc})") from exc
                return got

            target, fes = spans(layers["Target"]), spans(layers["FE"])
            if not target or not fes:
                continue
            if text_el is None or text_el.text is None:
                raise DataError(f"{where}: sentence without <text>")
            out.append(_record(where, text_el.text, [(s, e) for _, s, e in target],
                               sorted(({"name": n, "type": types.get(n), "start": s, "end": e} for n, s, e in fes),
                                      key=lambda f: f["start"]),
                               annoset_id=int(aset.attrib["ID"]), sent_id=int(sent.attrib["ID"]), lu_id=lu_id, lu=lu,
                               frame=frame))
    return out


# ---- Penn-Treebank word tokens: the notebook's ``nltk.word_tokenize`` ----------------------------------------------

def treebank_tokens(text: str) -> list[str]:
    """NLTK's ``word_tokenize(text, preserve_line=True)``: the notebook's tokenizer without the Punkt sentence
    splitter (its model is a download; FrameNet's exemplars are one sentence each). Opening quotes become ``,
    closing ones '', clitics ('s, n't, 'll ...) and punctuation split off."""
    # memoised there: the notebook's filters tokenize each sentence and FE span several times (122,670 calls, 16 s
    # for 15,599 exemplars uncached)
    return list(word_tokens(text))


def read_core_sets(frame_dir: Path) -> dict[str, frozenset[str]]:
    """{frame name: the FE names listed in its ``<FEcoreSet>``s} from FrameNet's frame XML (the notebook's
    ``lu['frame']['FEcoreSets']``); a frame without core sets maps to an empty set."""
    frame_dir = Path(frame_dir)
    files = sorted(frame_dir.glob("*.xml"))
    if not files:
        raise DataError(f"{frame_dir}: no frame XML files (FrameNet's frame/*.xml; see framenet_v15/SOURCE.md)")
    out = {}
    for path in files:
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, LookupError) as exc:  # LookupError: an unknown encoding declared
            raise DataError(f"{path}: not well-formed XML ({exc})") from exc
        if root.tag != f"{NS}frame" or "name" not in root.attrib:
            raise DataError(f"{path}: expected a FrameNet <frame name=...> document, got <{root.tag}>")
        out[root.attrib["name"]] = frozenset(m.attrib.get("name") for cs in root.findall(f"{NS}FEcoreSet")
                                             for m in cs.findall(f"{NS}memberFE"))
    return out


def notebook_is_close(text: str, target: tuple[int, int], fes: list[FrameElement]) -> bool:
    """The notebook's ``is_close``: True (drop the sentence) when the target string is not a token of the sentence,
    or when a token within two positions of its first occurrence (itself included) is, as a string, a token of
    any FE span."""
    toks = treebank_tokens(text)
    try:
        i = toks.index(text[target[0]:target[1]])
    except ValueError:
        return True
    fe_tokens = {t for fe in fes for t in treebank_tokens(text[fe.start:fe.end])}
    return any(t in fe_tokens for t in toks[max(0, i - 2):i + 3])


def notebook_filters(records: list[FrameRecord], core_sets: dict[str, frozenset[str]], max_words: int = MAX_WORDS,
                     max_fe_words: int = MAX_FE_WORDS) -> tuple[list[FrameRecord], list[FilterStep]]:
    """The notebook's annotation loop (module docstring, "notebook"); each kept record's ``links`` are its FEs
    named in the frame's core sets, in span order. A frame missing from ``core_sets`` is an error."""
    steps = []

    def step(text, recs):
        steps.append(FilterStep(text, len(recs), len({r.lu_id for r in recs})))
        return recs

    recs = step("annotation sets read", records)
    # every whitespace-separated chunk is at least one Treebank token (the tokenizer only splits), so a sentence of
    # more chunks than max_words is out without tokenizing it (most exemplars: 3x faster, the same records)
    recs = step(f"sentence <= {max_words} word_tokenize tokens",
                [r for r in recs if len(r.text.split()) <= max_words and len(treebank_tokens(r.text)) <= max_words])
    recs = step("one target span", [r for r in recs if len(r.target_spans) == 1])
    recs = step(f"every FE <= {max_fe_words} tokens",
                [r for r in recs if all(len(treebank_tokens(r.text[fe.start:fe.end])) <= max_fe_words
                                        for fe in r.fes)])
    recs = step("no FE token within 2 of the target",
                [r for r in recs if not notebook_is_close(r.text, r.target_spans[0], r.fes)])
    kept = []
    for r in recs:
        if r.frame not in core_sets:
            raise DataError(f"{r.source}: frame {r.frame!r} has no frame XML file (needed for its FEcoreSets)")
        links = [fe for fe in r.fes if fe.name in core_sets[r.frame]]
        if links:
            kept.append(replace(r, links=links))  # a copy: the project's filters set links on the same records
    step("a core-set FE (frame XML FEcoreSets)", kept)
    return kept, steps


@dataclass
class FilterStep:
    description: str
    n_records: int
    n_lus: int


def apply_filters(records: list[FrameRecord], max_words: int = MAX_WORDS, max_fe_words: int = MAX_FE_WORDS,
                  min_distance: int = MIN_DISTANCE) -> tuple[list[FrameRecord], list[FilterStep]]:
    """The paper's filters in order (module docstring); each kept record's ``links`` are its qualifying core FEs."""
    steps = []

    def step(text, recs):
        steps.append(FilterStep(text, len(recs), len({r.lu_id for r in recs})))
        return recs

    def with_fe(recs, ok):
        return [r for r in recs if any(ok(r, fe) for fe in r.fes)]

    recs = step("annotation sets read", records)
    recs = step(f"sentence <= {max_words} tokens", [r for r in recs if len(r.words) <= max_words])
    core = lambda r, fe: fe.type in CORE_TYPES  # noqa: E731
    recs = step("a core frame element", with_fe(recs, core))
    short = lambda r, fe: core(r, fe) and len(fe.words) <= max_fe_words  # noqa: E731
    recs = step(f"... of <= {max_fe_words} tokens", with_fe(recs, short))
    far = lambda r, fe: short(r, fe) and min(abs(t - f) for t in r.target_words for f in fe.words) >= min_distance  # noqa: E731
    recs = step(f"... >= {min_distance} tokens from the target", with_fe(recs, far))
    for r in recs:
        r.links = [fe for fe in r.fes if far(r, fe)]
    return recs, steps


def one_per_lu(records: list[FrameRecord], seed: int = SAMPLE_SEED) -> list[FrameRecord]:
    """One record per lexical unit, chosen with a seeded generator (records in file order per LU)."""
    by_lu: dict[int, list[FrameRecord]] = {}
    for r in records:
        by_lu.setdefault(r.lu_id, []).append(r)
    rng = random.Random(seed)
    return [rng.choice(by_lu[k]) for k in sorted(by_lu)]


@dataclass
class FrameNetSet:
    records: list[FrameRecord]  # the measured sentences (the paper's example last, if not already in)
    steps: list[FilterStep]
    description: str
    paths: list[Path]
    example: FrameRecord | None = None


def load_example(data_dir: Path, notebook: bool = False) -> FrameRecord:
    """The paper's "He was becoming agitated" from the raw LU XML, with the filters' links (the notebook's when
    ``notebook``)."""
    path = data_file(Path(data_dir), f"{XML_DIR}/{EXAMPLE['file']}")
    found = [r for r in read_lu_xml(path) if r.annoset_id == EXAMPLE["annoset_id"]]
    if not found:
        raise DataError(f"{path}: annotation set {EXAMPLE['annoset_id']} (the paper's example) not found")
    kept, _ = notebook_filters(found, core_sets(data_dir)) if notebook else apply_filters(found)
    if not kept:
        raise DataError(f"{path}: annotation set {EXAMPLE['annoset_id']} does not pass the "
                        f"{'notebook' if notebook else 'paper'}'s filters")
    return kept[0]


def _stamp(path: Path) -> tuple:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


@lru_cache(maxsize=2)
def _filtered(path: Path, *stamp) -> tuple[list[FrameRecord], list[FilterStep]]:
    """Read and filter once per process (the model and its random twin share it); keyed by the file's stamp."""
    return apply_filters(read_jsonl(path))


@lru_cache(maxsize=2)
def _core_sets(frame_dir: Path) -> dict[str, frozenset[str]]:
    return read_core_sets(frame_dir)


def core_sets(data_dir: Path) -> dict[str, frozenset[str]]:
    return _core_sets(data_file(Path(data_dir), FRAME_DIR))


@lru_cache(maxsize=2)
def _notebook(path: Path, frame_dir: Path, *stamp) -> tuple[list[FrameRecord], list[FilterStep]]:
    return notebook_filters(read_jsonl(path), _core_sets(frame_dir))


PAPER_N = "the paper: 473 sentences on FrameNet 1.7"


def load_corpus(data_dir: Path, corpus: str = "notebook", limit: int | None = None) -> FrameNetSet:
    if corpus not in CORPORA:
        raise DataError(f"unknown FrameNet corpus {corpus!r} (known: {', '.join(CORPORA)})")
    path = data_file(Path(data_dir), JSONL)
    notebook = corpus == "notebook"
    if notebook:
        frame_dir = data_file(Path(data_dir), FRAME_DIR)
        kept, steps = _notebook(path, frame_dir, *_stamp(path))
    else:
        kept, steps = _filtered(path, *_stamp(path))
    steps = list(steps)
    chosen = one_per_lu(kept) if corpus == "one_per_lu" else kept
    if corpus == "one_per_lu":
        steps.append(FilterStep(f"one per lexical unit (seed {SAMPLE_SEED})", len(chosen), len(chosen)))
    if limit:
        chosen = chosen[:limit]
        steps.append(FilterStep(f"--limit {limit}", len(chosen), len({r.lu_id for r in chosen})))
    example = load_example(data_dir, notebook)
    if example.annoset_id not in {r.annoset_id for r in chosen}:
        chosen = chosen + [example]
    chain = " -> ".join(f"{s.description} {s.n_records:,}" for s in steps)
    lus = len({r.lu_id for r in chosen})
    desc = (f"FrameNet 1.5 exemplars ({JSONL}), {CORPORA[corpus]}: {chain}"
            + f"; + the paper's example (annoset {example.annoset_id}, {EXAMPLE['file']}) = {len(chosen):,} "
              f"sentences of {lus:,} LUs" + (f" ({PAPER_N})" if notebook else ""))
    paths = [path, path.parent / "raw_xml_samples" / "lu" / EXAMPLE["file"]]
    if notebook:
        paths.append(frame_dir)
    return FrameNetSet(chosen, steps, desc, paths, example)
