"""matrix.html in a real browser (issue 49): headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven
by Selenium opens the page of a real two-model report, the embedded model and its random-init twin (the negative
control), made once per session by a ``--limit`` run of the surface and dependency families, and of a synthetic
report with known answers (tests/test_matrix.py's records). Checked: no console error; every figure link resolves
to a PNG that the browser draws; the disagreement filter leaves exactly the rows whose verdicts differ in
``matrix.json``; the search narrows to one claim; "lost" marks, the verdict filter and the sort on known values;
with JavaScript off, the full table and no controls. Skips with one line where no browser (or no data) is there.

``--matrix-screenshot PATH`` (tests/conftest.py) also writes the screenshot of the regression view to PATH (the
one in docs/: ``pytest tests/test_matrix_browser.py --matrix-screenshot docs/matrix-regression-view.png``)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from shared_data import prepared_data

from bertattn_bench.report import matrix as mx
from bertattn_bench.report.matrix_page import write_matrix

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 20  # segments / sentences per corpus of the session's report
SELECT = "(surface or dependency) and not uncased_similar"


def _browser_paths() -> tuple[str, str] | None:
    browser = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _start(javascript: bool = True):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = _browser_paths()
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000",
                "--allow-file-access-from-files"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not javascript:
        opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)  # the system's driver: no download


if _browser_paths() is None:  # one line for the module
    pytest.skip("no browser: apt-get install chromium chromium-driver to open matrix.html in headless Chromium",
                allow_module_level=True)
pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[test]')")


@pytest.fixture(scope="session")
def browser():
    from selenium.common.exceptions import WebDriverException

    try:
        driver = _start()
    except WebDriverException as exc:  # an install that does not start (the environment, not the page)
        pytest.skip(f"headless chromium did not start: {str(exc.msg or exc).splitlines()[0]}")
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def report(browser, tmp_path_factory) -> Path:
    """A real two-model claims report: ``pytest benchmarks -k SELECT --limit LIMIT --claims-report DIR`` on the
    embedded model, whose random-init twin runs as the negative control (its own column), in a cache of its own."""
    data = prepared_data("wikitext2_raw/", "ud_english_ewt/")
    tmp = tmp_path_factory.mktemp("browser-report")
    out = tmp / "report"
    env = {**os.environ, "BERTATTN_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider", "-k", SELECT,
           "--limit", str(LIMIT), "--benchmark-disable", "--cache-dir", str(tmp / "cache"), "--claims-report", str(out)]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    print(f"report for the browser test: {time.perf_counter() - start:.1f} s ({' '.join(cmd[1:])})")
    assert (out / "matrix.html").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _open(driver, page: Path):
    driver.get(page.resolve().as_uri())
    driver.get_log("browser")  # the log of the previous page is dropped with this read


def _visible_rows(driver) -> list[tuple[str, str]]:
    """(claim, corpus) of each claim row the page shows."""
    return [tuple(x) for x in driver.execute_script(
        "return Array.from(document.querySelectorAll('tr.claim')).filter(r => r.offsetParent !== null)"
        ".map(r => [r.querySelector('th[scope=row] b').textContent, r.children[1].textContent]);")]


def _set(driver, name: str, value) -> None:
    """Set a control as a user would (an input event reaches the page's handler)."""
    driver.execute_script(
        "const el = document.getElementById('controls').elements[arguments[0]];"
        "if (el.type === 'checkbox') el.checked = arguments[1]; else el.value = arguments[1];"
        "el.dispatchEvent(new Event('input', {bubbles: true}));", name, value)


def _reset(driver) -> None:
    driver.execute_script("document.getElementById('controls').reset();")
    time.sleep(0.05)


def test_real_report_no_console_errors_and_every_figure_link_resolves(browser, report):
    page = report / "matrix.html"
    driver = browser
    driver.get(page.resolve().as_uri())
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    doc = json.loads((report / "matrix.json").read_text(encoding="utf-8"))
    labels = [c["label"] for c in doc["columns"]]
    assert len(labels) == 2 and labels[1].endswith("(control)"), labels  # the model and its twin
    assert driver.find_element("id", "controls").is_displayed()
    assert driver.find_element("id", "shown").text == f"{len(doc['rows'])} of {len(doc['rows'])} rows shown"
    # every figure: its link is a file under the report's figures/ that exists, and the browser draws it
    driver.execute_script("document.querySelectorAll('details.figures').forEach(d => d.open = true);")
    links = driver.execute_script("return Array.from(document.querySelectorAll('details.figures a')).map(a => a.href);")
    pngs = sorted((report / "figures").glob("*.png"))
    assert pngs and len(set(links)) == len(pngs)  # each model's figures (surface and dependency), each linked
    for href in links:
        url = urlparse(href)
        assert url.scheme == "file" and Path(unquote(url.path)).is_file(), href
        assert Path(unquote(url.path)).parent.resolve() == (report / "figures").resolve()
    deadline = time.time() + 20
    while True:
        drawn = driver.execute_script("const i = Array.from(document.querySelectorAll('details.figures img'));"
                                      "i.forEach(x => x.scrollIntoView());"
                                      "return i.map(x => [x.getAttribute('src'), x.complete && x.naturalWidth > 0]);")
        if all(ok for _, ok in drawn) or time.time() > deadline:
            break
        time.sleep(0.2)
    assert len(drawn) == len(pngs) and [s for s, ok in drawn if not ok] == []
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []  # no image failed to load


def test_real_report_disagreement_filter_and_search(browser, report, request):
    driver = browser
    _open(driver, report / "matrix.html")
    doc = json.loads((report / "matrix.json").read_text(encoding="utf-8"))
    every = [(r["claim"], r["corpus"]) for r in doc["rows"]]
    assert _visible_rows(driver) == every
    differ = [(r["claim"], r["corpus"]) for r in doc["rows"]
              if len({c["verdict"] for c in r["cells"].values()}) > 1]
    assert 0 < len(differ) < len(every)  # the check can tell a filter that keeps all or none
    _set(driver, "disagree", True)
    assert _visible_rows(driver) == differ
    assert driver.find_element("id", "shown").text == f"{len(differ)} of {len(every)} rows shown"
    shot = request.config.getoption("--matrix-screenshot")
    driver.execute_script("document.getElementById('claims-title').scrollIntoView();")
    png = driver.get_screenshot_as_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    if shot:
        Path(shot).write_bytes(png)
    # the search: a claim id that is in no other claim's id or statement narrows the table to that claim
    _reset(driver)
    texts = {r["claim"]: r["claim"] for r in doc["rows"]}
    ids = sorted(texts)
    unique = next(i for i in ids if sum(i in j for j in ids) == 1)
    _set(driver, "q", unique.upper())  # case does not matter
    shown = _visible_rows(driver)
    assert shown and {c for c, _ in shown} == {unique}
    assert len(shown) == sum(1 for r in doc["rows"] if r["claim"] == unique)
    _reset(driver)
    assert _visible_rows(driver) == every


# ---- a synthetic report with known answers (tests/test_matrix.py's records) -------------------------------------------

@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    from test_matrix import TWIN, A, B, records

    out = tmp_path_factory.mktemp("synthetic-matrix")
    (out / "figures").mkdir()
    write_matrix(mx.build(records(A, B, TWIN), reference="minilm"), out)
    return out / "matrix.html"


def _lost(driver) -> list[tuple[str, str]]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('td .lost')).map(s => [s.closest('tr')"
        ".querySelector('th[scope=row] b').textContent, s.closest('td').dataset.col]);")


def test_synthetic_lost_marks_verdict_filter_and_sort(browser, synthetic):
    driver = browser
    _open(driver, synthetic)
    # minilm (column 0) is the reference: clark.sep holds there, not on tiny-roberta (column 1) -> lost; the twin's
    # (column 2) "does not hold" is never lost; clark.dep does not hold on minilm -> nothing lost
    assert [tuple(x) for x in _lost(driver)] == [("clark.sep", "1")]
    _set(driver, "verdict", "lost")
    assert _visible_rows(driver) == [("clark.sep", "wikitext2")]
    _reset(driver)
    _set(driver, "reference", "1")  # tiny-roberta the reference: what it holds (clark.prev) minilm also holds
    assert _lost(driver) == []
    _reset(driver)
    assert [tuple(x) for x in _lost(driver)] == [("clark.sep", "1")]  # reset: minilm again
    _set(driver, "verdict", "inconclusive")
    assert _visible_rows(driver) == [("clark.dep", "ewt_dev")]
    _set(driver, "vcol", "0")  # inconclusive on minilm: none
    assert _visible_rows(driver) == []
    _reset(driver)
    _set(driver, "paper", "Niven & Kao 2019")
    assert _visible_rows(driver) == [("niven.cue", "wikitext2")]
    _set(driver, "disagree", True)  # niven.cue: skipped on minilm only (blank elsewhere): no disagreement
    assert _visible_rows(driver) == []
    _reset(driver)
    sort = driver.find_element("css selector", "th[data-col='1'] button.sort")
    sort.click()  # tiny-roberta's values, largest first (prev 1, dep 0.5, sep 0.25), the row without one last
    assert [c for c, _ in _visible_rows(driver)] == ["clark.prev", "clark.dep", "clark.sep", "niven.cue"]
    assert driver.find_element("css selector", "th[data-col='1']").get_attribute("aria-sort") == "descending"
    sort.click()
    assert [c for c, _ in _visible_rows(driver)] == ["clark.sep", "clark.dep", "clark.prev", "niven.cue"]
    _set(driver, "q", "clark.")  # a filter set while sorted holds when the order goes back
    assert [c for c, _ in _visible_rows(driver)] == ["clark.sep", "clark.dep", "clark.prev"]
    sort.click()  # back to the written order (paper, section, claim)
    assert [c for c, _ in _visible_rows(driver)] == ["clark.prev", "clark.sep", "clark.dep"]
    assert driver.execute_script("return document.querySelectorAll('tbody.group:not([hidden])').length") == 2
    _reset(driver)
    assert [c for c, _ in _visible_rows(driver)] == ["clark.prev", "clark.sep", "clark.dep", "niven.cue"]
    # printed: no controls, the column headers repeated on each page, the verdict colours kept
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        assert not driver.find_element("id", "controls").is_displayed()
        assert driver.execute_script("return getComputedStyle(document.querySelector('#claims thead')).display"
                                     ) == "table-header-group"
        assert driver.execute_script("return getComputedStyle(document.querySelector('td.holds'))"
                                     ".printColorAdjust") == "exact"
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_without_javascript_the_full_table_and_no_controls(browser, synthetic):
    driver = _start(javascript=False)
    try:
        driver.get(synthetic.resolve().as_uri())
        assert not driver.find_element("id", "controls").is_displayed()
        assert len(_visible_rows(driver)) == 4  # (read through the driver's script, which the page's setting spares)
        assert not driver.find_elements("css selector", "button.sort")
    finally:
        driver.quit()


def test_an_inconclusive_cell_holding_the_reference_value_is_not_lost(browser, synthetic):
    """Issue 61: the page's "lost" mark reads the one rule (claims.verdicts.lost): an inconclusive cell whose
    interval holds the reference column's value agrees with it (two runs that differ only by the seed), one whose
    interval does not is lost. The synthetic page's clark.sep cell of tiny-roberta (column 1) made inconclusive
    with either interval; minilm's value there is 0.5."""
    driver = browser
    _open(driver, synthetic)

    def plant(lo: float, hi: float) -> list:
        driver.execute_script(
            "const c = Array.from(document.querySelectorAll('tr.claim')).find(r => r.querySelector("
            "'th[scope=row] b').textContent === 'clark.sep').querySelector('td[data-col=\"1\"]');"
            "c.dataset.verdict = 'inconclusive'; c.dataset.lo = arguments[0]; c.dataset.hi = arguments[1];", lo, hi)
        _set(driver, "reference", "1")  # the handler marks again on a change of reference
        _set(driver, "reference", "0")
        return [tuple(x) for x in _lost(driver)]

    assert plant(0.2, 0.55) == []  # 0.5 inside [0.2, 0.55]: agrees
    assert plant(0.2, 0.45) == [("clark.sep", "1")]  # 0.5 outside: lost
    # stop 70: the reference's own noise counts too (minilm 0.5 [0.4, 0.6]; here 0.25): 0.5 lies outside [0.2, 0.49],
    # but |0.5 - 0.25| = 0.25 <= sqrt(0.24^2 + 0.1^2) = 0.26: the two agree (claims.verdicts.agrees)
    assert plant(0.2, 0.49) == []
