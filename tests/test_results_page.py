"""The results page (ragmi.report.results_page): built from a fixture results folder (tests/test_run_summary.py's
write_fixture), then loaded in headless Chromium: the verdict badges of the rendered DOM against
summary.csv, no horizontal overflow at 1,280 px, the sort script ran, and a screenshot of the right
size with content. The Chromium tests skip when neither ``chromium`` nor ``chromium-browser`` is
installed (Debian: ``apt-get install chromium``; .ci/run installs it)."""

from __future__ import annotations

import csv
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_run_summary import CONFIG, write_fixture

from ragmi.report.provenance import provenance
from ragmi.report.results_page import build_page, write_page

WIDTH, HEIGHT = 1280, 2000
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium; .ci/run does)"
)
# appended to a copy of the page (never to the page itself): reports the page's width to the DOM dump,
# then sorts the summary by AUC (a click on its header) and reports the first row's AUC
PROBE = """<script>window.addEventListener('load',function(){
var b=document.body;b.setAttribute('data-scroll-width',String(document.documentElement.scrollWidth));
var t=document.getElementById('summary-table'),ths=t.tHead.rows[0].cells,col=-1;
for(var i=0;i<ths.length;i++){if(ths[i].textContent.indexOf('AUC')===0)col=i;}
ths[col].click();b.setAttribute('data-first-auc',t.tBodies[0].rows[0].cells[col].textContent);
ths[col].click();b.setAttribute('data-last-sort',t.tBodies[0].rows[0].cells[col].textContent);});</script>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """results/results.html of the fixture, built as the rule builds it (paths relative to the run)."""
    root = tmp_path_factory.mktemp("page")
    res = write_fixture(root)
    import os

    cwd = os.getcwd()
    os.chdir(root)
    try:
        prov = provenance(CONFIG, "results", hash_files=False)
        tables = {p.stem: f"results/tables/{p.name}" for p in sorted((res / "tables").glob("*.csv"))}
        figures = [str(p.relative_to(root)) for p in sorted((res / "figures").rglob("*.png"))]
        write_page("results/results.html", results_dir="results", tables=tables, figures=figures, provenance=prov)
    finally:
        os.chdir(cwd)
    return res / "results.html"


def _summary_verdicts(res: Path) -> Counter:
    with open(res / "tables" / "summary.csv", newline="") as f:
        return Counter(r["verdict"] for r in csv.DictReader(f))


class _Badges(HTMLParser):
    """The data-verdict of every element inside the table with id summary-table; and every <img> src."""

    def __init__(self):
        super().__init__()
        self.depth, self.verdicts, self.imgs, self.ids = 0, [], [], []
        self.attrs: dict = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        if tag == "body":
            self.attrs = a
        if tag == "table" and a.get("id") == "summary-table":
            self.depth = 1
        elif self.depth and tag == "table":
            self.depth += 1
        if self.depth and "data-verdict" in a:
            self.verdicts.append(a["data-verdict"])
        if tag == "img":
            self.imgs.append(a.get("src", ""))

    def handle_endtag(self, tag):
        if self.depth and tag == "table":
            self.depth -= 1


def _parse(text: str) -> _Badges:
    p = _Badges()
    p.feed(text)
    return p


# ---------------------------------------------------------------------------------------------------
# the HTML itself


def test_page_is_self_contained_and_in_order(page):
    text = page.read_text()
    # nothing loaded from elsewhere: no external stylesheet, script, image or font
    assert not re.search(r"""(src|href)=["'](https?:)?//""", text)
    assert "<link" not in text and "@import" not in text and "url(" not in text
    parsed = _parse(text)
    assert len(parsed.imgs) == 3 and all(s.startswith("data:image/png;base64,") for s in parsed.imgs)
    # the sections in the order a reader wants them
    ids = parsed.ids
    order = ["summary", "targets", "audit", "privacy-utility", "provenance", "tables"]
    assert [ids.index(i) for i in order] == sorted(ids.index(i) for i in order)
    assert ids.index("target-synthetic-qwen-rag") < ids.index("target-synthetic-pad") < ids.index("audit")
    for name in ("hook_inventory", "canaries", "leakage_dashboard"):
        assert name in ids
    # one badge per summary row, as many of each verdict as summary.csv has
    assert Counter(parsed.verdicts) == _summary_verdicts(page.parent)
    # the verdict colours: leaks red, control failed / inverted orange, uninformative grey, no evidence light
    for verdict, cls in (
        ("leaks", "v-leaks"),
        ("control failed", "v-orange"),
        ("inverted", "v-orange"),
        ("uninformative", "v-grey"),
        ("no evidence at this n", "v-light"),
    ):
        assert f'class="badge {cls}" data-verdict="{verdict}"' in text


def test_every_number_links_to_its_csv_row(page):
    text = page.read_text()
    # the first summary row's AUC, relative to the page, with a tooltip naming the file and the row
    assert (
        '<a class="n" href="tables/summary.csv#row-1" title="results/tables/summary.csv, row 1 (line 2)">'
        "0.81 [0.68, 0.90]</a>"
    ) in text
    # the 9th row's numbers link to row 9; the not-computed AUC is not a number
    assert (
        'href="tables/summary.csv#row-9"' in text
        and "#row-10" not in text.split("summary-table")[1].split("</table>")[0]
    )
    # the other tables' numbers too: the defended target's ΔAUC, the canaries, the privacy_utility rows
    assert re.search(r'href="tables/defense_effect.csv#row-\d+"[^>]*>ΔAUC −0.23', text)
    assert (
        'href="tables/canaries.csv#row-2" title="results/tables/canaries.csv, row 2 (line 3)">3/40 (7.5%)</a>' in text
    )
    assert 'href="tables/privacy_utility.csv#row-3"' in text  # pad's headline-measure row
    assert 'href="tables/privacy_utility.csv#row-2"' not in text  # another measure: in the CSV only
    # the machine columns of the audit tables stay out
    assert "EMAIL_REAL_mean" not in text and "canary_rate" not in text
    # every link points at a file the run wrote
    for href in set(re.findall(r'href="([^"#]+)(?:#[^"]*)?"', text)):
        if not href.startswith("#"):
            assert (page.parent / href).exists() or href.endswith(".md"), href


def test_provenance_section(page):
    text = page.read_text()
    section = text.split('id="provenance"')[1]
    assert "config digest" in section and re.search(r"sha256:[0-9a-f]{64}", section)
    assert "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32" in section  # the packaged Qwen
    assert "CPU" in section and "GPU" in section and "wall time" in section
    assert "2 jobs" in section


def test_missing_optional_tables_are_left_out(tmp_path):
    res = write_fixture(tmp_path, figures=False, gate=False)
    for name in ("hook_inventory", "canaries", "leakage_dashboard", "privacy_utility", "defense_effect"):
        (res / "tables" / f"{name}.csv").unlink()
    text = build_page(res, provenance={})
    ids = _parse(text).ids
    assert "summary-table" in ids and "audit" not in ids and "privacy-utility" not in ids
    assert "Release gate" not in text and "Defense effect" not in text
    # without a summary table: the page says so
    (res / "tables" / "summary.csv").unlink()
    text = build_page(res, provenance={})
    assert "builds no summary table" in text and "data-verdict" not in text


# ---------------------------------------------------------------------------------------------------
# in the browser


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        f"--window-size={WIDTH},{HEIGHT}",
        *args,
    ]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=25)
    except subprocess.TimeoutExpired:
        pytest.fail("headless Chromium did not finish within 25 s")


@needs_chromium
def test_rendered_dom_has_one_badge_per_summary_row(page, tmp_path):
    probe = page.with_name("results.probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    out = _chromium(tmp_path, "--dump-dom", probe.as_uri())
    assert out.returncode == 0, out.stderr[-2000:]
    dom = _parse(out.stdout)
    assert dom.verdicts, out.stdout[:500]
    assert Counter(dom.verdicts) == _summary_verdicts(page.parent)
    # the sort script ran (it titles every sortable header) and the page is no wider than the window
    assert out.stdout.count('title="Sort by this column"') >= 9
    assert int(dom.attrs["data-scroll-width"]) <= WIDTH
    # a click on the AUC header sorts the rows by AUC, a second click the other way
    assert dom.attrs["data-first-auc"] == "0.30 [0.17, 0.46]"
    assert dom.attrs["data-last-sort"] == "0.91 [0.79, 0.98]"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _distinct_colours(path: Path) -> tuple[int, float, int]:
    """(distinct colours, share of white pixels, pixels of the leaks badge's red) with PIL; without it
    a rough stand-in from the PNG's decompressed scanlines (distinct byte values, share of 0xff bytes, -1)."""
    try:
        from PIL import Image
    except ImportError:
        data = path.read_bytes()
        raw, pos = b"", 8
        while pos < len(data):
            n, kind = struct.unpack(">I4s", data[pos : pos + 8])
            if kind == b"IDAT":
                raw += data[pos + 8 : pos + 8 + n]
            pos += 12 + n
        pixels = zlib.decompress(raw)
        return len(set(pixels)), pixels.count(255) / len(pixels), -1
    with Image.open(path) as im:
        rgb = im.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20) or []
        total = rgb.width * rgb.height
        white = sum(n for n, c in colours if c == (255, 255, 255))
        red = sum(n for n, c in colours if all(abs(a - b) <= 6 for a, b in zip(c, (0xCF, 0x22, 0x2E))))
        return len(colours), white / total, red


@needs_chromium
def test_screenshot_at_1280_shows_the_page(page, tmp_path):
    shot = tmp_path / "results_page.png"  # kept with pytest's last temporary folders, to look at
    out = _chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    assert out.returncode == 0 and shot.is_file(), out.stderr[-2000:]
    assert _png_size(shot.read_bytes()) == (WIDTH, HEIGHT)
    colours, white, red = _distinct_colours(shot)
    assert colours > 50, f"{shot}: {colours} colours: a blank page?"
    assert white < 0.97, f"{shot}: {white:.1%} white"
    if red >= 0:
        assert red > 100, f"{shot}: no red 'leaks' badge rendered"


# ---------------------------------------------------------------------------------------------------
# which TPR each cell is


def _cells(table_html: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows of cell texts) of one HTML table, tags stripped."""
    import html as _html

    def text(x):
        return _html.unescape(re.sub(r"<[^>]+>", "", x))

    header = [text(h) for h in re.findall(r"<th>(.*?)</th>", table_html)]
    rows = [
        [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)] for tr in re.findall(r"<tr>(.*?)</tr>", table_html)
    ]
    return header, [r for r in rows if r]


def test_summary_tpr_cells_say_which_tpr_and_the_fpr_it_realised(tmp_path):
    """Each TPR cell of the page's summary says which TPR it is: "(eval ROC)", or the FPR its reference
    threshold realised on the evaluation non-members, with its interval and n."""
    from ragmi.report.results_page import Linker, read_csv, summary_table

    res = write_fixture(tmp_path, figures=False, gate=False)
    _, rows = read_csv(res / "tables" / "summary.csv")
    header, body = _cells(summary_table(rows, Linker(res / "tables" / "summary.csv", res)))
    roc = next(i for i, h in enumerate(header) if "(eval ROC)" in h)
    ref = next(i for i, h in enumerate(header) if h.startswith("TPR at ref. threshold"))
    computed = [(r, cells) for r, cells in zip(rows, body) if r["tpr"] != ""]
    assert computed
    for r, cells in computed:
        assert cells[roc].endswith(" (eval ROC)"), cells[roc]
        assert cells[ref] == f"{float(r['tpr']):.2f} [0.02, 0.55] (eval FPR 0.05 [0.00, 0.25], n = 20)"


def test_privacy_utility_tpr_cell_carries_its_realised_fpr(tmp_path):
    from ragmi.report.results_page import Linker, csv_table

    row = {
        "dataset": "d",
        "target": "pad",
        "utility_metric": "f1",
        "auc": "0.8",
        "auc_lo": "0.7",
        "auc_hi": "0.9",
        "tpr_fpr": "0.05",
        "tpr_low_fpr": "0.6",
        "tpr_low_fpr_lo": "0.4",
        "tpr_low_fpr_hi": "0.8",
        "tpr_fpr_realized": "0.15",
        "tpr_fpr_realized_lo": "0.0321",
        "tpr_fpr_realized_hi": "0.3789",
        "tpr_n_nonmembers": "20",
    }
    header, body = _cells(csv_table("privacy_utility", list(row), [row], Linker(tmp_path / "pu.csv", tmp_path)))
    i = next(i for i, h in enumerate(header) if h.startswith("TPR at ref. threshold"))
    assert body[0][i] == "0.60 [0.40, 0.80] at the ref. threshold for 5% FPR (eval FPR 0.15 [0.03, 0.38], n = 20)"
