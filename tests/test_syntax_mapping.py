"""UD → SD mapping (sd_arcs) and fixed-offset baselines on hand-made trees with known answers."""
from __future__ import annotations

import pytest

from bertattn_bench.data.ud import Sentence
from bertattn_bench.families.dependency import RELATIONS, UD_TO_SD, Arc, offset_baselines, sd_arcs


def sent(rows: list[tuple]) -> Sentence:
    """rows: (word, head (1-based, 0=root), deprel, upos, xpos)."""
    words, heads, deprels, upos, xpos = (list(c) for c in zip(*rows))
    return Sentence(words=words, heads=heads, deprels=deprels, upos=upos, xpos=xpos)


def by_rel(arcs: list[Arc], relation: str) -> list[Arc]:
    return [a for a in arcs if a.relation == relation]


# "He sat on the mat ."
MAT = sent([
    ("He", 2, "nsubj", "PRON", "PRP"),   # 0
    ("sat", 0, "root", "VERB", "VBD"),   # 1
    ("on", 5, "case", "ADP", "IN"),      # 2
    ("the", 5, "det", "DET", "DT"),      # 3
    ("mat", 2, "obl", "NOUN", "NN"),     # 4
    (".", 2, "punct", "PUNCT", "."),     # 5
])


def test_prepositional_phrase_gives_pobj_and_prep():
    arcs = sd_arcs(MAT)
    assert by_rel(arcs, "pobj") == [Arc("pobj", dependent=4, head=2)]  # SD: pobj(on, mat)
    assert by_rel(arcs, "prep") == [Arc("prep", dependent=2, head=1)]  # SD: prep(sat, on)
    assert by_rel(arcs, "nsubj") == [Arc("nsubj", 0, 1)]
    assert by_rel(arcs, "det") == [Arc("det", 3, 4)]


def test_all_excludes_punct_and_root():
    arcs = sd_arcs(MAT)
    all_arcs = by_rel(arcs, "All")
    # the UD arcs themselves (not the SD re-headed pobj/prep), minus punct; the root has no arc
    assert sorted((a.dependent, a.head) for a in all_arcs) == [(0, 1), (2, 4), (3, 4), (4, 1)]
    assert all(a.dependent != 5 for a in arcs)  # "." is in no relation at all
    assert all(a.dependent != 1 for a in arcs if a.relation != "prep")  # the root is nobody's dependent


def test_exact_arc_list_for_the_mat_sentence():
    assert sorted(sd_arcs(MAT), key=lambda a: (a.relation, a.dependent)) == sorted([
        Arc("All", 0, 1), Arc("nsubj", 0, 1),
        Arc("All", 2, 4), Arc("pobj", 4, 2), Arc("prep", 2, 1),
        Arc("All", 3, 4), Arc("det", 3, 4),
        Arc("All", 4, 1),
    ], key=lambda a: (a.relation, a.dependent))


def test_nmod_case_also_gives_pobj_and_prep():
    # "the roof of the house": of --case--> house --nmod--> roof
    s = sent([
        ("the", 2, "det", "DET", "DT"),      # 0
        ("roof", 0, "root", "NOUN", "NN"),   # 1
        ("of", 5, "case", "ADP", "IN"),      # 2
        ("the", 5, "det", "DET", "DT"),      # 3
        ("house", 2, "nmod", "NOUN", "NN"),  # 4
    ])
    arcs = sd_arcs(s)
    assert by_rel(arcs, "pobj") == [Arc("pobj", 4, 2)]
    assert by_rel(arcs, "prep") == [Arc("prep", 2, 1)]


def test_obl_subtype_counts_as_nominal_modifier():
    # "He left on Monday": Monday obl:tmod
    s = sent([
        ("He", 2, "nsubj", "PRON", "PRP"),
        ("left", 0, "root", "VERB", "VBD"),
        ("on", 4, "case", "ADP", "IN"),
        ("Monday", 2, "obl:tmod", "PROPN", "NNP"),
    ])
    arcs = sd_arcs(s)
    assert by_rel(arcs, "pobj") == [Arc("pobj", 3, 2)]
    assert by_rel(arcs, "prep") == [Arc("prep", 2, 1)]


def test_case_of_root_nominal_gives_no_pobj():
    # a fragment "On Monday": Monday is the root (deprel root, not obl/nmod), so no pobj and no prep
    s = sent([
        ("On", 2, "case", "ADP", "IN"),
        ("Monday", 0, "root", "PROPN", "NNP"),
    ])
    arcs = sd_arcs(s)
    assert by_rel(arcs, "pobj") == []
    assert by_rel(arcs, "prep") == []
    assert arcs == [Arc("All", 0, 1)]


def test_case_that_is_not_adp_gives_no_pobj():
    # case with UPOS PART (not ADP) on an obl: no pobj/prep
    s = sent([
        ("went", 0, "root", "VERB", "VBD"),
        ("home", 1, "obl", "NOUN", "NN"),
        ("to", 2, "case", "PART", "TO"),
    ])
    arcs = sd_arcs(s)
    assert by_rel(arcs, "pobj") == [] and by_rel(arcs, "prep") == []


def test_case_under_obj_gives_no_pobj():
    s = sent([
        ("saw", 0, "root", "VERB", "VBD"),
        ("of", 3, "case", "ADP", "IN"),
        ("it", 1, "obj", "PRON", "PRP"),
    ])
    arcs = sd_arcs(s)
    assert by_rel(arcs, "pobj") == [] and by_rel(arcs, "prep") == []
    assert by_rel(arcs, "dobj") == [Arc("dobj", 2, 0)]


# "John 's dog barked"
POSS = sent([
    ("John", 3, "nmod:poss", "PROPN", "NNP"),  # 0
    ("'s", 1, "case", "PART", "POS"),          # 1
    ("dog", 4, "nsubj", "NOUN", "NN"),         # 2
    ("barked", 0, "root", "VERB", "VBD"),      # 3
])


def test_possessive_with_s_as_alternative_dependent():
    arcs = sd_arcs(POSS)
    assert by_rel(arcs, "poss") == [Arc("poss", dependent=0, head=2, alt=1)]
    # nmod:poss is not a nominal modifier for pobj, even if its case were tagged ADP
    assert by_rel(arcs, "pobj") == [] and by_rel(arcs, "prep") == []
    assert by_rel(arcs, "nsubj") == [Arc("nsubj", 2, 3)]
    assert sorted((a.dependent, a.head) for a in by_rel(arcs, "All")) == [(0, 2), (1, 0), (2, 3)]


@pytest.mark.parametrize("marker", ["'s", "'S", "'", "’s", "’"])
def test_possessive_markers(marker):
    s = sent([
        ("boss", 3, "nmod:poss", "NOUN", "NN"),
        (marker, 1, "case", "PART", "POS"),
        ("office", 0, "root", "NOUN", "NN"),
    ])
    assert by_rel(sd_arcs(s), "poss") == [Arc("poss", 0, 2, alt=1)]


def test_pronoun_possessive_has_no_alt():
    # "his dog barked"
    s = sent([
        ("his", 2, "nmod:poss", "PRON", "PRP$"),
        ("dog", 3, "nsubj", "NOUN", "NN"),
        ("barked", 0, "root", "VERB", "VBD"),
    ])
    assert by_rel(sd_arcs(s), "poss") == [Arc("poss", 0, 1, alt=-1)]


def test_possessive_case_adp_is_still_not_pobj():
    s = sent([
        ("John", 3, "nmod:poss", "PROPN", "NNP"),
        ("'s", 1, "case", "ADP", "POS"),
        ("dog", 0, "root", "NOUN", "NN"),
    ])
    arcs = sd_arcs(s)
    assert by_rel(arcs, "poss") == [Arc("poss", 0, 2, alt=1)]
    assert by_rel(arcs, "pobj") == []


def test_infinitival_to_is_aux_and_other_mark_is_mark():
    # "I want to go because it rains"
    s = sent([
        ("I", 2, "nsubj", "PRON", "PRP"),        # 0
        ("want", 0, "root", "VERB", "VBP"),      # 1
        ("to", 4, "mark", "PART", "TO"),         # 2
        ("go", 2, "xcomp", "VERB", "VB"),        # 3
        ("because", 7, "mark", "SCONJ", "IN"),   # 4
        ("it", 7, "nsubj", "PRON", "PRP"),       # 5
        ("rains", 2, "advcl", "VERB", "VBZ"),    # 6
    ])
    arcs = sd_arcs(s)
    assert by_rel(arcs, "aux") == [Arc("aux", 2, 3)]
    assert by_rel(arcs, "mark") == [Arc("mark", 4, 6)]
    assert by_rel(arcs, "nsubj") == [Arc("nsubj", 0, 1), Arc("nsubj", 5, 6)]


@pytest.mark.parametrize("ud, sd", [
    ("obj", "dobj"), ("compound", "nn"), ("compound:prt", "prt"), ("aux:pass", "auxpass"), ("aux", "aux"),
    ("det", "det"), ("nsubj", "nsubj"), ("amod", "amod"), ("advmod", "advmod"), ("ccomp", "ccomp"),
])
def test_one_to_one_relations(ud, sd):
    s = sent([
        ("a", 2, ud, "X", "X"),
        ("b", 0, "root", "X", "X"),
    ])
    assert sd_arcs(s) == [Arc("All", 0, 1), Arc(sd, 0, 1)]


@pytest.mark.parametrize("ud", ["det:predet", "nsubj:pass", "obl", "nmod", "conj", "cc", "xcomp", "case", "iobj",
                                "compound:nn_unknown", "csubj"])
def test_unmapped_relations_are_only_in_all(ud):
    s = sent([
        ("a", 2, ud, "X", "X"),
        ("b", 0, "root", "X", "X"),
    ])
    assert sd_arcs(s) == [Arc("All", 0, 1)]


def test_punct_is_in_no_relation():
    s = sent([("b", 0, "root", "X", "X"), ("!", 1, "punct", "PUNCT", ".")])
    assert sd_arcs(s) == []


def test_phrasal_verb_and_passive():
    # "The car was picked up": car nsubj:pass, was aux:pass, up compound:prt
    s = sent([
        ("The", 2, "det", "DET", "DT"),
        ("car", 4, "nsubj:pass", "NOUN", "NN"),
        ("was", 4, "aux:pass", "AUX", "VBD"),
        ("picked", 0, "root", "VERB", "VBN"),
        ("up", 4, "compound:prt", "ADP", "RP"),
    ])
    arcs = sd_arcs(s)
    assert by_rel(arcs, "auxpass") == [Arc("auxpass", 2, 3)]
    assert by_rel(arcs, "prt") == [Arc("prt", 4, 3)]
    assert by_rel(arcs, "nsubj") == []
    assert by_rel(arcs, "nn") == []
    assert by_rel(arcs, "det") == [Arc("det", 0, 1)]


def test_every_relation_produced_is_a_clark_relation():
    for s in (MAT, POSS):
        assert {a.relation for a in sd_arcs(s)} <= set(RELATIONS)
    assert set(UD_TO_SD.values()) <= set(RELATIONS)


# ---- offset_baselines -----------------------------------------------------------------------------------------

def test_offset_baseline_best_offset_and_percent():
    arcs = [
        [Arc("det", 0, 1), Arc("det", 3, 4), Arc("det", 5, 7)],  # offsets +1, +1, +2
        [Arc("det", 2, 3)],                                      # +1
        [Arc("nsubj", 4, 2), Arc("nsubj", 0, 1)],                 # -2, +1
    ]
    base = offset_baselines(arcs)
    det = base["det"]
    assert det.offset == 1
    assert det.n == 4
    assert det.accuracy == pytest.approx(75.0)
    assert det.right_branching == pytest.approx(75.0)
    # nsubj: a tie between -2 and +1 → the smaller |offset| wins
    assert base["nsubj"].offset == 1
    assert base["nsubj"].accuracy == pytest.approx(50.0)
    # relations with no arcs are absent
    assert "pobj" not in base and "All" not in base


def test_offset_baseline_negative_best_offset_right_branching_differs():
    arcs = [[Arc("All", 1, 0), Arc("All", 2, 1), Arc("All", 3, 2), Arc("All", 4, 6), Arc("All", 0, 1)]]
    base = offset_baselines(arcs)["All"]
    assert base.offset == -1
    assert base.accuracy == pytest.approx(60.0)
    assert base.right_branching == pytest.approx(20.0)  # one arc of five at +1
    assert base.n == 5


def test_offset_baseline_uses_head_not_alt():
    # poss: "John 's dog": dependent 0, head 2, alt 1 — offset is head - dependent = +2
    base = offset_baselines([[Arc("poss", 0, 2, alt=1)]])["poss"]
    assert base.offset == 2 and base.accuracy == 100.0 and base.right_branching == 0.0


def test_offset_baseline_restricted_relations():
    arcs = [[Arc("det", 0, 1), Arc("All", 0, 1)]]
    base = offset_baselines(arcs, relations=("det",))
    assert set(base) == {"det"}


def test_offset_baselines_from_sd_arcs_end_to_end():
    base = offset_baselines([sd_arcs(MAT), sd_arcs(POSS)])
    # All arcs: MAT (0,1)+1 (2,4)+2 (3,4)+1 (4,1)-3 ; POSS (0,2)+2 (1,0)-1 (2,3)+1  → +1 three of seven
    assert base["All"].n == 7
    assert base["All"].offset == 1
    assert base["All"].accuracy == pytest.approx(300 / 7)
    assert base["All"].right_branching == pytest.approx(300 / 7)
    assert base["pobj"].offset == -2 and base["pobj"].accuracy == 100.0
    assert base["prep"].offset == -1
