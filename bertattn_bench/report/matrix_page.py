"""``matrix.html`` of the claims × models table (:mod:`bertattn_bench.report.matrix`): one page, inline CSS and a few
lines of inline JavaScript (filters by paper, family, section and verdict, the rows where the models disagree with
the claims lost against a reference column, search, sort by a column's value; without JavaScript the full table):
the table and, per model, the family figures found in the reports' ``figures/`` folders, linked by relative path,
or embedded as data URIs (``self_contained``). :func:`write_matrix` writes the page beside ``matrix.md``,
``matrix.csv`` and ``matrix.json``."""
from __future__ import annotations

import base64
import html
import os
import urllib.parse
from pathlib import Path

from ..claims.verdicts import verdict_of
from .matrix import (
    LEGEND,
    MARKS,
    Matrix,
    cell_text,
    claim_label,
    claim_summary,
    csv_text,
    json_doc,
    markdown,
    model_summary,
    row_group,
)

# ---- HTML ----------------------------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
table.claims{table-layout:fixed;width:100%} table.claims td,table.claims th{overflow-wrap:anywhere}
th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}
thead th{background:#f0f0f0;position:sticky;top:0;z-index:1} th[scope=row]{font-weight:normal;background:#fff}
th[scope=rowgroup]{background:#e8e8f0;font-size:14px} caption{text-align:left;font-weight:bold;padding:.3em 0}
td.holds{background:#e3f4e1} td.not{background:#fbe3e1} td.inconclusive{background:#fff4cc}
td.skipped{color:#888;background:#f7f7f7} td.notjudged{color:#666;background:#eeeef8} td.none{background:#fff}
td.control.holds{background:#fbe3e1} td.control.not{background:#e3f4e1}
.mark{font-weight:bold;margin-right:.3em} .delta{color:#555;font-size:11px} .stmt{color:#555;font-size:11px}
.vh{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.lost{display:inline-block;margin-left:.3em;padding:0 .3em;border:1px solid #a00;color:#a00;font-size:11px;font-weight:bold}
tr.has-lost th[scope=row]{border-left:4px solid #a00}
#controls{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;padding:.5em;background:#f6f6fa;border:1px solid #ddd;font-size:13px}
#controls[hidden]{display:none} #controls label{white-space:nowrap}
button.sort{font:inherit;font-weight:bold;background:none;border:0;padding:0;cursor:pointer;text-align:left}
button.sort::after{content:" \\2195";color:#888} th[aria-sort=ascending] button.sort::after{content:" \\2191"}
th[aria-sort=descending] button.sort::after{content:" \\2193"}
table.sorting tbody.group{display:none}
h3{margin-bottom:.2em} figure{display:inline-block;margin:.5em;vertical-align:top}
figure img{max-width:260px;border:1px solid #ddd} figcaption{font-size:11px;color:#555}
details.figures{margin:.5em 0} details.figures summary{cursor:pointer;font-weight:bold}
@media print{
 body{margin:0;font-size:9pt} #controls,button.sort::after{display:none}
 thead th{position:static} thead{display:table-header-group} tr{break-inside:avoid}
 table{font-size:8pt} td,th{-webkit-print-color-adjust:exact;print-color-adjust:exact}
 details.figures:not([open]){display:none} a[href]::after{content:" (" attr(href) ")";font-size:7pt}
}
"""

# the page's behaviour: filters, the disagreement (regression) view with its "lost" marks, search, sort by a
# column's value. Plain JavaScript, inline: works from file:// and offline; without it the page is the full table.
_SCRIPT = """
(function () {
  var form = document.getElementById('controls'), table = document.getElementById('claims');
  if (!form || !table) return;
  form.hidden = false;
  var rows = Array.prototype.slice.call(table.querySelectorAll('tr.claim'));
  var groups = Array.prototype.slice.call(table.querySelectorAll('tbody.group'));
  var sorted = document.createElement('tbody');
  sorted.id = 'sorted'; table.appendChild(sorted);
  function cells(r) { return Array.prototype.slice.call(r.querySelectorAll('td[data-col]')); }
  rows.forEach(function (r) {  // models disagree: the row's cells do not all give one verdict
    var seen = {};
    cells(r).forEach(function (c) { seen[c.dataset.verdict] = 1; });
    r.classList.toggle('disagree', Object.keys(seen).length > 1);
    r.dataset.text = r.querySelector('th[scope=row]').textContent.toLowerCase();
  });
  function markLost() {  // claims.verdicts.lost: clearly holds on the reference column, does not hold or is inconclusive on another model
    var ref = form.elements.reference.value;
    rows.forEach(function (r) {
      var any = false, rc = r.querySelector('td[data-col="' + ref + '"]');
      cells(r).forEach(function (c) {
        var old = c.querySelector('.lost');
        if (old) c.removeChild(old);
        // an inconclusive cell agrees with the reference within their combined noise (claims.verdicts.agrees)
        var rv = parseFloat(rc ? rc.dataset.value : ''), lo = parseFloat(c.dataset.lo), hi = parseFloat(c.dataset.hi);
        var v = parseFloat(c.dataset.value), agrees = false;
        if (!isNaN(rv) && !isNaN(lo) && !isNaN(hi)) {
          if (isNaN(v)) { agrees = lo <= rv && rv <= hi; } else {
            var up = rv >= v, h = Math.max(up ? hi - v : v - lo, 0);
            var rlo = parseFloat(rc.dataset.lo), rhi = parseFloat(rc.dataset.hi), hr = 0;
            if (!isNaN(rlo) && !isNaN(rhi)) { hr = Math.max(up ? rv - rlo : rhi - rv, 0); }
            agrees = Math.abs(rv - v) <= Math.sqrt(h * h + hr * hr) + 1e-12;
          }
        }
        var lost = !!rc && rc !== c && rc.dataset.verdict === 'holds' && c.dataset.control !== '1' &&
                   (c.dataset.verdict === 'does not hold' || (c.dataset.verdict === 'inconclusive' && !agrees));
        if (lost) {
          var b = document.createElement('span');
          b.className = 'lost'; b.textContent = 'lost'; b.title = 'holds on the reference column, not here';
          c.appendChild(b); any = true;
        }
      });
      r.classList.toggle('has-lost', any);
    });
  }
  function apply() {
    var f = form.elements, q = f.q.value.trim().toLowerCase(), shown = 0;
    rows.forEach(function (r) {
      var v = f.verdict.value, col = f.vcol.value;
      var ok = (!f.paper.value || r.dataset.paper === f.paper.value) &&
               (!f.family.value || r.dataset.family === f.family.value) &&
               (!f.section.value || r.dataset.group === f.section.value) &&
               (!f.disagree.checked || r.classList.contains('disagree')) &&
               (!q || r.dataset.text.indexOf(q) >= 0) &&
               (!v || (v === 'lost' ? r.classList.contains('has-lost') : cells(r).some(function (c) {
                  return c.dataset.verdict === v && (!col || c.dataset.col === col); })));
      r.hidden = !ok;
      if (ok) shown++;
    });
    groups.forEach(function (g) { g.hidden = !g.querySelector('tr.claim:not([hidden])'); });
    document.getElementById('shown').textContent = shown + ' of ' + rows.length + ' rows shown';
  }
  var sortCol = null, sortDir = 0;
  function value(r) {
    var c = r.querySelector('td[data-col="' + sortCol + '"]');
    var v = c && c.dataset.value !== undefined && c.dataset.value !== '' ? parseFloat(c.dataset.value) : NaN;
    return v;
  }
  function sortBy(col) {
    sortDir = sortCol !== col ? -1 : (sortDir === -1 ? 1 : 0);  // largest first, smallest first, as written
    sortCol = sortDir ? col : null;
    table.querySelectorAll('thead th[data-col]').forEach(function (th) {
      th.setAttribute('aria-sort', th.dataset.col === sortCol ? (sortDir < 0 ? 'descending' : 'ascending') : 'none');
    });
    if (!sortDir) {
      rows.forEach(function (r) { r.home.appendChild(r); });
      table.classList.remove('sorting');
    } else {
      rows.slice().sort(function (a, b) {
        var x = value(a), y = value(b);
        if (isNaN(x) || isNaN(y)) return isNaN(x) - isNaN(y);  // no value: last
        return sortDir * (x - y);
      }).forEach(function (r) { sorted.appendChild(r); });
      table.classList.add('sorting');
    }
    apply();  // the filters hold in either order
  }
  rows.forEach(function (r) { r.home = r.parentNode; });
  table.querySelectorAll('thead th[data-col]').forEach(function (th) {
    var b = document.createElement('button');
    b.type = 'button'; b.className = 'sort'; b.title = 'sort by this column\\'s value';
    while (th.firstChild) b.appendChild(th.firstChild);
    th.appendChild(b); th.setAttribute('aria-sort', 'none');
    b.addEventListener('click', function () { sortBy(th.dataset.col); });
  });
  form.addEventListener('input', function (e) { if (e.target.name === 'reference') markLost(); apply(); });
  form.addEventListener('change', function (e) { if (e.target.name === 'reference') markLost(); apply(); });
  form.addEventListener('submit', function (e) { e.preventDefault(); });
  form.addEventListener('reset', function () { setTimeout(function () { markLost(); apply(); }, 0); });
  markLost(); apply();
}());
"""


def _css_class(r: dict | None, control: bool) -> str:
    if r is None:
        return "none"
    v = verdict_of(r)
    base = {"holds": "holds", "does not hold": "not", "inconclusive": "inconclusive", "not judged": "notjudged",
            "skipped": "skipped"}[v]
    return base + (" control" if control else "")


def _options(name: str, label: str, values, selected: str = "", first: str | None = "all") -> str:
    e = html.escape
    opts = ([f"<option value=''>{e(first)}</option>"] if first is not None else []) + [
        f"<option value='{e(v, quote=True)}'{' selected' if v == selected else ''}>{e(t)}</option>" for v, t in values]
    return f"<label>{e(label)} <select name='{name}'>{''.join(opts)}</select></label>"


def _figure_html(png: Path, base: Path, self_contained: bool) -> str:
    """A figure: a thumbnail linking to the file (path relative to the page), or embedded (``self_contained``)."""
    e = html.escape
    if self_contained:
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        return (f"<figure><img alt='{e(png.stem, quote=True)}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{e(png.name)}</figcaption></figure>")
    href = e(urllib.parse.quote(Path(os.path.relpath(png.resolve(), Path(base).resolve())).as_posix()), quote=True)
    return (f"<figure><a href='{href}'><img loading='lazy' alt='{e(png.stem, quote=True)}' src='{href}'></a>"
            f"<figcaption><a href='{href}'>{e(png.name)}</a></figcaption></figure>")


def html_page(m: Matrix, title: str = "bertattn-bench: claims × models", base: Path | None = None,
              self_contained: bool = False) -> str:
    """The page: the summary, one table of every claim row (a row group per paper and section), the filter and
    compare controls (inline JavaScript; hidden without it) and each model's figures, linked by their path relative
    to ``base`` (the page's folder; default the working folder) or, ``self_contained``, embedded as data URIs."""
    from ..claims.catalog import claim_families

    e = html.escape
    base = Path.cwd() if base is None else Path(base)
    families = claim_families()
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             f"<meta name='viewport' content='width=device-width,initial-scale=1'><link rel='icon' href='data:,'>"
             f"<title>{e(title)}</title><style>{_CSS}</style></head><body><h1>{e(title)}</h1>"
             f"<p>{len(m.rows)} claim rows × {len(m.columns)} models. {e(LEGEND)}."
             + (f" Δ: value minus {e(m.reference.label)}'s." if m.reference else "")
             + " A control column (random-init twin) is green where the claim does <em>not</em> hold.</p>"]
    parts.append("<h2>Summary per model</h2><table class='summary'><thead><tr><th scope='col'>model</th>"
                 + "".join(f"<th scope='col'>{k}</th>" for k in ("holds", "does not hold", "inconclusive",
                                                                 "not judged", "skipped", "rows"))
                 + "</tr></thead><tbody>")
    for s in model_summary(m):
        parts.append(f"<tr><th scope='row'>{e(s['model'] + s['note'])}</th><td>{s['holds']}</td>"
                     f"<td>{s['does not hold']}</td><td>{s['inconclusive']}</td><td>{s['not judged']}</td>"
                     f"<td>{s['skipped']}</td><td>{s['rows']}</td></tr>")
    parts.append("</tbody></table>")

    # the controls: a hidden form the script shows (without JavaScript: the full table, nothing to click)
    col_ids = {c.key: str(i) for i, c in enumerate(m.columns)}
    models = [c for c in m.columns if not c.control]
    ref = m.reference or (models[0] if models else None)
    groups = list(dict.fromkeys(row_group(r) for r in m.rows))
    verdicts = [(v, f"{MARKS[v]} {v}") for v in ("holds", "does not hold", "inconclusive", "not judged", "skipped")]
    parts.append(
        "<h2 id='claims-title'>Claims</h2><form id='controls' hidden aria-label='filter and compare'>"
        + _options("paper", "paper", [(p, p) for p in dict.fromkeys(r["paper"] for r in m.rows)])
        + _options("family", "family", [(f, f) for f in sorted({families.get(r["claim"], "") for r in m.rows} - {""})])
        + _options("section", "section", [(f"{p} {s}", f"{p}, {s}") for p, s in groups])
        + _options("verdict", "verdict", verdicts + [("lost", "lost (vs the reference)")], first="any")
        + _options("vcol", "in", [(col_ids[c.key], c.label) for c in m.columns], first="any column")
        + "<label><input type='checkbox' name='disagree'> only rows where the models disagree</label>"
        + _options("reference", "reference", [(col_ids[c.key], c.label) for c in models],
                   col_ids[ref.key] if ref else "", first=None)
        + "<label>search <input type='search' name='q' placeholder='claim id or statement'></label>"
        + "<button type='reset'>show all</button> <output id='shown' aria-live='polite'></output></form>")

    share = 50 / max(1, len(m.columns))  # claim 20%, data 6%, reference 14%, needs 6%, holds-on 4%, models the rest
    cols = ("<colgroup><col style='width:20%'><col style='width:6%'><col style='width:14%'><col style='width:6%'>"
            + "".join(f"<col style='width:{share:.2f}%'>" for _ in m.columns) + "<col style='width:4%'></colgroup>")
    head = "".join(f"<th scope='col' data-col='{col_ids[c.key]}'>{e(c.label)}</th>" for c in m.columns)
    parts.append(f"<table class='claims' id='claims' aria-labelledby='claims-title'>{cols}<thead><tr>"
                 f"<th scope='col'>claim</th><th scope='col'>data</th><th scope='col'>paper's reference</th>"
                 f"<th scope='col'>needs</th>{head}<th scope='col'>holds on</th></tr></thead>")
    current = None
    for row in m.rows:
        group = row_group(row)
        if group != current:
            if current is not None:
                parts.append("</tbody>")
            parts.append(f"<tbody class='group'><tr class='grouphead'><th scope='rowgroup' colspan='{len(m.columns) + 5}'>"
                         f"{e(group[0])}, {e(group[1])}</th></tr>")
            current = group
        ref_cell = row["cells"].get(m.reference.key) if m.reference else None
        tds = []
        for c in m.columns:
            r = row["cells"].get(c.key)
            if r is None:
                tds.append("<td class='none'></td>")
                continue
            text = cell_text(r, ref_cell if not c.control else None)
            mark, _, rest = text.partition(" ")
            value, _, delta = rest.partition(" Δ ")
            verdict = verdict_of(r)
            tip = e(r.get("skipped") or r.get("detail") or "", quote=True)
            measured = r.get("measured")
            bounds = r.get("interval") or ()
            span = f" data-lo='{bounds[0]!r}' data-hi='{bounds[1]!r}'" if len(bounds) == 2 else ""
            tds.append(f"<td class='{_css_class(r, c.control)}' data-col='{col_ids[c.key]}' "
                       f"data-verdict='{e(verdict, quote=True)}' data-value='{'' if measured is None else repr(measured)}'"
                       f"{span}"
                       f"{' data-control=1' if c.control else ''} title='{tip}'>"
                       f"<span class='mark' aria-hidden='true'>{e(mark)}</span><span class='vh'>{e(verdict)}: </span>"
                       f"{e(value)}" + (f" <span class='delta'>Δ {e(delta)}</span>" if delta else "") + "</td>")
        attrs = (f"data-paper='{e(row['paper'], quote=True)}' data-group='{e(' '.join(group), quote=True)}' "
                 f"data-family='{e(families.get(row['claim'], ''), quote=True)}'")
        parts.append(f"<tr class='claim{' paired' if row.get('pairs') else ''}' {attrs}><th scope='row'><b>{e(claim_label(row))}</b>"
                     f"<div class='stmt'>{e(row['statement'])}</div></th>"
                     f"<td>{e(row['corpus'])}</td><td>{e(row['reference'])}</td><td>{e(row['comparison'])}</td>"
                     + "".join(tds) + f"<td>{e(claim_summary(row, m.columns))}</td></tr>")
    if current is not None:
        parts.append("</tbody>")
    parts.append("</table>")
    if m.figures:
        parts.append("<h2>Figures per model</h2>")
        for c in m.columns:
            pngs = m.figures.get(c.key, [])
            if pngs:
                parts.append(f"<details class='figures'><summary>{e(c.label)}: {len(pngs)} figure(s)</summary>"
                             + "".join(_figure_html(p, base, self_contained) for p in pngs) + "</details>")
    parts.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "".join(parts)


def write_matrix(m: Matrix, directory: Path, self_contained: bool = False) -> list[Path]:
    """``matrix.md``, ``matrix.csv``, ``matrix.html`` and ``matrix.json`` in ``directory``; the page links each
    figure by its path relative to ``directory`` or, ``self_contained``, embeds it (one file to send)."""
    from ..base.documents import write_json

    directory.mkdir(parents=True, exist_ok=True)
    out = []
    page = html_page(m, base=directory, self_contained=self_contained)
    for name, text in (("matrix.md", markdown(m)), ("matrix.csv", csv_text(m)), ("matrix.html", page)):
        path = directory / name
        path.write_text(text, encoding="utf-8")
        out.append(path)
    out.append(write_json(directory / "matrix.json", json_doc(m), "matrix"))
    return out
