"""Every claim of the catalog runs: each of its rows is tested by at least one entry of reference_numbers/*.toml
(its own id, or variants naming it with ``catalog = "<id>"``), no entry names a row the catalog does not have, and
the package counts them (``catalog_claims``, ``bertattn-bench list``)."""
import re
from pathlib import Path

import pytest

from bertattn_bench.claims.catalog import Claim, catalog_claims, load_claims

CATALOG = Path(__file__).resolve().parents[2] / "shared" / "claims-catalog.md"


def catalog_rows() -> set[str]:
    return set(re.findall(r"^\| *`?([a-z]+\.[a-z0-9_]+)`? *\|", CATALOG.read_text(encoding="utf-8"), re.M))


@pytest.mark.skipif(not CATALOG.is_file(), reason="the claims catalog (../shared/claims-catalog.md) is not here")
def test_every_catalog_row_is_tested_and_no_entry_names_another():
    rows = catalog_rows()
    assert len(rows) == 108
    tested = catalog_claims()
    assert set(tested) == rows  # every row has an entry; no entry points outside the catalog
    assert sum(len(v) for v in tested.values()) + sum(c.catalog_id is None for c in load_claims()) == len(load_claims())


def test_catalog_id_of_an_entry():
    base = dict(paper="p", section="s", statement="t", family="f", metric="m", comparison=">=", threshold=0,
                reference="r", source="s", rationale="r", tolerance=0.1, tolerance_rationale="t")
    assert Claim(id="a.x", **base).catalog_id == "a.x"
    assert Claim(id="a.x_ft", catalog="a.x", **base).catalog_id == "a.x"
    assert Claim(id="a.extra", catalog=False, **base).catalog_id is None
    entries = [Claim(id="a.x", **base), Claim(id="a.x_ft", catalog="a.x", **base), Claim(id="a.y", catalog=False, **base)]
    assert {k: [c.id for c in v] for k, v in catalog_claims(entries).items()} == {"a.x": ["a.x", "a.x_ft"]}


def test_the_list_command_counts_the_catalog(capsys):
    from bertattn_bench.faces.cli import main

    assert main(["list"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    n = len(load_claims())
    papers = ("Htut et al. 2019", "Kobayashi et al. 2020", "Kobayashi et al. 2021", "Voita et al. 2019")
    beyond = {p: sum(c.paper == p for c in load_claims()) for p in papers}
    assert all(beyond.values())  # the papers beyond the catalog (norms, trees, roles), counted beside its 108
    assert last == (f"{n} entries: {len(catalog_claims())} claim(s) of the catalog (with their variants), 2 addition(s) "
                    f"of the project, " + ", ".join(f"{beyond[p]} of {p}" for p in papers))
