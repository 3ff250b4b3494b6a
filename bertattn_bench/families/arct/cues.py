"""Niven & Kao §4, Table 2 (the model-free arct family): cue productivity and coverage."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

# ---- cue statistics --------------------------------------------------------------------------------------------

def cues(tokens: list[str], ngrams: tuple[int, ...] = (1, 2)) -> set[str]:
    """The set of n-grams (space-joined) of one warrant's tokens."""
    return {" ".join(tokens[i:i + k]) for k in ngrams for i in range(len(tokens) - k + 1)}


@dataclass
class CueTable:
    """α and productive counts of every cue over ``n`` arguments of one split under one tokenisation."""

    n: int
    applicable: dict[str, int]
    productive: dict[str, int]

    def alpha(self, cue: str) -> int:
        return self.applicable.get(cue, 0)

    def productivity(self, cue: str) -> float:
        a = self.alpha(cue)
        return self.productive.get(cue, 0) / a if a else float("nan")

    def coverage(self, cue: str) -> float:
        return self.alpha(cue) / self.n if self.n else float("nan")

    def row(self, cue: str) -> str:
        return f"α={self.alpha(cue)} π={self.productivity(cue):.3f} ξ={self.coverage(cue):.3f} (n={self.n})"

    def top(self, min_productivity: float = 0.5, unigrams_only: bool = False, k: int = 5,
            key: str = "coverage") -> list[str]:
        """Cues with π ≥ ``min_productivity`` sorted by coverage (or productivity), best first (ties by name)."""
        pool = [c for c in self.applicable if self.productivity(c) >= min_productivity
                and (not unigrams_only or " " not in c)]
        score = self.coverage if key == "coverage" else self.productivity
        return sorted(pool, key=lambda c: (-score(c), -self.alpha(c), c))[:k]


def cue_table(items, tokenize, ngrams: tuple[int, ...] = (1, 2)) -> CueTable:
    """Niven & Kao's α/π counts for every cue: a cue is applicable to an argument when it is in exactly one
    warrant, productive when that warrant is the correct one (``item.label``)."""
    applicable, productive = Counter(), Counter()
    memo: dict[str, set[str]] = {}

    def of(text):
        if text not in memo:
            memo[text] = cues(tokenize(text), ngrams)
        return memo[text]

    n = 0
    for item in items:
        n += 1
        in0, in1 = of(item.warrant0), of(item.warrant1)
        for cue in in0 ^ in1:
            applicable[cue] += 1
            if (cue in in0) == (item.label == 0):
                productive[cue] += 1
    return CueTable(n, dict(applicable), dict(productive))
