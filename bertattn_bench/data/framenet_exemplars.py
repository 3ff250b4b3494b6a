"""FrameNet 1.5's exemplar JSONL (``framenet_v15/lu_exemplars_max15tok.jsonl``, framenet_v15/SOURCE.md), rebuilt
from the LU files of the manifest's archive (dasmith/FrameNet-python): the rebuild rule ``framenet_lu_exemplars``
(:func:`.manifest.archive_rule`). The readers and the paper's filters are :mod:`.framenet_corpus`.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from ..base.errors import DataError

NS = "{http://framenet.icsi.berkeley.edu}"  # FrameNet's XML namespace
LU_MEMBERS = "fndata-1.5/lu/lu*.xml"  # inside dasmith/FrameNet-python at the manifest's commit (11,829 files)
EXEMPLAR_MAX_WORDS = 15  # the JSONL keeps sentences of at most this many whitespace tokens
EXEMPLAR_CORE = ("Core", "Core-Unexpressed")  # ... with at least one spanned FE of these types


def exemplar_records(data: bytes, where: str) -> list[dict]:
    """The JSONL records of one FrameNet 1.5 ``lu*.xml`` (framenet_v15/SOURCE.md): per sentence and annotation set,
    the rank-1 ``Target`` labels and rank-1 ``FE`` labels (end made exclusive), FE types from the LU header (``None``
    where the name is missing there), FEs without a span as ``null_instantiated``; kept with >= 1 target span, >= 1
    spanned FE, <= 15 whitespace tokens and >= 1 spanned Core/Core-Unexpressed FE. Target spans and FEs are sorted by
    start (stable): the XML lists the targets of 19 records out of order."""
    try:
        root = ET.fromstring(data)
        a = root.attrib
        types = {fe.attrib.get("name"): fe.attrib.get("type") for fe in root.findall(f"{NS}header/{NS}frame/{NS}FE")}
        lu = {"lu_id": int(a["ID"]), "lu": a["name"], "pos": a["POS"], "frame": a["frame"],
              "frame_id": int(a["frameID"])}
    except ET.ParseError as exc:
        raise DataError(f"{where}: not well-formed XML ({exc})") from exc
    except (KeyError, ValueError) as exc:
        raise DataError(f"{where}: <lexUnit> lacks a valid ID/name/POS/frame/frameID attribute ({exc})") from exc
    out = []
    for sent in root.iter(f"{NS}sentence"):
        text_el = sent.find(f"{NS}text")
        for aset in sent.findall(f"{NS}annotationSet"):
            here = f"{where}, sentence {sent.attrib.get('ID', '?')}, annotationSet {aset.attrib.get('ID', '?')}"
            target, fes, nulls = [], [], []
            try:
                for layer in aset.findall(f"{NS}layer"):
                    if layer.attrib.get("rank") != "1" or layer.attrib.get("name") not in ("Target", "FE"):
                        continue
                    for lab in layer.findall(f"{NS}label"):
                        name = lab.attrib.get("name")
                        if "start" not in lab.attrib:
                            if layer.attrib["name"] == "FE":
                                nulls.append({"name": name, "type": types.get(name), "itype": lab.attrib.get("itype")})
                            continue
                        start, end = int(lab.attrib["start"]), int(lab.attrib["end"]) + 1
                        if layer.attrib["name"] == "Target":
                            target.append([start, end])
                        else:
                            fes.append({"name": name, "type": types.get(name), "start": start, "end": end})
            except (KeyError, ValueError) as exc:
                raise DataError(f"{here}: a label with a bad start/end ({exc})") from exc
            if not target or not fes:
                continue
            if text_el is None or text_el.text is None:
                raise DataError(f"{here}: sentence without <text>")
            text = text_el.text
            if len(text.split()) > EXEMPLAR_MAX_WORDS or not any(f["type"] in EXEMPLAR_CORE for f in fes):
                continue
            try:
                ids = {"sent_id": int(sent.attrib["ID"]), "annoset_id": int(aset.attrib["ID"])}
            except (KeyError, ValueError) as exc:
                raise DataError(f"{here}: a sentence or annotation set without a valid ID ({exc})") from exc
            out.append({**lu, **ids, "annoset_status": aset.attrib.get("status"), "text": text,
                        "target": sorted(target, key=lambda sp: sp[0]), "fes": sorted(fes, key=lambda f: f["start"]),
                        "null_instantiated": nulls})
    return out


class ExemplarBuilder:
    """``framenet_v15/lu_exemplars_max15tok.jsonl`` from the LU files, given one at a time in any order: the records
    follow the files in file-name order as a directory listing sorts them (``lu10.xml`` before ``lu100.xml``), each
    file's in document order; one compact JSON object per line, UTF-8 unescaped."""

    def __init__(self):
        self._lines: dict[str, list[str]] = {}

    def add(self, member: str, data: bytes) -> None:
        name = member.rsplit("/", 1)[-1]
        self._lines[name] = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                             for r in exemplar_records(data, member)]

    def result(self) -> bytes:
        return "".join(line for name in sorted(self._lines) for line in self._lines[name]).encode("utf-8")
