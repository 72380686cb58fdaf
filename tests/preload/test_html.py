"""report --html in a real browser: Debian's headless Chromium (through chromedriver and
python3-selenium) opens the page from a file, offline; the test reads the page's own DOM and takes
screenshots. First the demo's database (2 GPUs) with 2500 GPU-timed copies of one pair added (its charts
drawn as percentile bands), then databases of a cluster job made by
scripts/make-bigdb.py: 8 GPUs and 64 GPUs, and 1000 processes (their mappings a matrix per host, 16 at
most); then a job under the simulated NCCL and one of cross-process mappings (mapsim.py), each
section checked against the database. P2PG_SCREENSHOT_DIR=folder keeps the screenshots
(docs/report-2gpu.png, docs/report-8gpu.png, docs/report-64gpu.png were made so)."""
import os
import sys

from harness import *

use_system_python("selenium.webdriver")
import selenium.webdriver

import shutil
import sqlite3
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.join(SOURCE, "tests/nccl"))
from ncclsim import nccl_job  # noqa: E402 (the simulated NCCL under the guard)
from mapsim import mapping_job  # noqa: E402 (cross-process mappings under the guard)


def page_checks(browser, name, gpus, processes):
    """What every page must do, whatever its size."""
    toc = [a.get_attribute("href").split("#")[1] for a in browser.find_elements(By.CSS_SELECTOR, "nav#toc a")]
    check(len(toc) >= 8 and all(browser.find_elements(By.ID, t) for t in toc),
          "%s: a table of contents whose every link has its section (%s)" % (name, toc))
    widths = browser.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    check(widths[0] <= widths[1], "%s: no sideways scrolling of the page (%s)" % (name, widths))
    # One script a question: a WebDriver call per cell or tick costs ~10 ms, and a 64-GPU page has
    # thousands of them.
    rows = browser.execute_script("""
        return Array.from(document.querySelectorAll('#matrix tr'), r =>
            [r.querySelectorAll('td').length, r.getBoundingClientRect().height]);""")
    cells = [r[0] for r in rows[1:]]
    equal((len(rows) - 1, set(cells)), (gpus, {gpus}), "%s: the matrix is %d x %d" % (name, gpus, gpus))
    heights = {r[1] for r in rows[1:]}
    check(max(heights) <= (24 if gpus > 8 else 60), "%s: matrix rows stay one line high, nothing wraps (%s px)" % (name, sorted(heights)))
    colours = set(browser.execute_script("""
        return Array.from(document.querySelectorAll('#matrix td[data-p50]'),
                          td => getComputedStyle(td).backgroundColor);"""))
    check(len(colours) >= min(2, gpus - 1), "%s: cells heat-coloured by bandwidth (%d colours)" % (name, len(colours)))
    ticks = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg text.tick'), t => t.textContent);")
    check(ticks and not any("e+" in t or "e-" in t for t in ticks), "%s: axis ticks without e-notation" % name)
    clipped = browser.execute_script("""
        let bad = [];
        for (const svg of document.querySelectorAll('details[open] svg, .multiples svg')) {
          const box = svg.getBoundingClientRect();
          for (const t of svg.querySelectorAll('text')) {
            const r = t.getBoundingClientRect();
            if (r.width && (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1))
              bad.push(t.textContent);
          }
        }
        return bad;""")
    equal(clipped, [], "%s: no axis label outside its chart" % name)
    equal(len(browser.find_elements(By.CSS_SELECTOR, "#ranks tr")) - 1, processes, "%s: a rank row per process" % name)
    equal(browser.execute_script("return performance.getEntriesByType('resource').length"), 0, "%s: the page fetched nothing" % name)


def banded(browser, name, expect_dense=False):
    """Past 2000 points a chart draws per time bin the p10-p90 band and the p50 line, not a smear of
    points. expect_dense: the page must have such charts (else the check says nothing)."""
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.bw-time, svg.multiple")
    dense = [c for c in charts if int(c.get_attribute("data-points")) > 2000]
    if expect_dense:
        check(len(dense) > 0, "%s: charts past 2000 points (%d)" % (name, len(dense)))
    check(all(c.get_attribute("data-drawn") == "percentiles" and not c.find_elements(By.CSS_SELECTOR, "circle")
              and c.find_elements(By.CSS_SELECTOR, "polyline.p50") for c in dense),
          "%s: %d charts past 2000 points drawn as percentile bands" % (name, len(dense)))


def copy_cards(browser, name, db):
    """The summary's copy cards against the database: every call once (peer_totals), the timed ones
    (rows with a copy time), the untimed rest of the successful ones (rows without a GPU time,
    summary buckets, overflow) and the calls folded into overflow."""
    calls, failed = query(db, "SELECT coalesce(sum(calls), 0), coalesce(sum(failures), 0) FROM peer_totals "
                              "WHERE src_device IS NOT NULL AND dst_device IS NOT NULL")[0]
    timed = scalar(db, "SELECT count(*) FROM transfers WHERE status = 0 AND gpu_ns > 0 AND src_device IS NOT NULL "
                       "AND dst_device IS NOT NULL")
    folded = scalar(db, "SELECT coalesce(sum(count), 0) FROM transfer_overflow")
    shown = {k: int(browser.find_element(By.ID, k).text.replace(",", ""))
             for k in ("n-calls", "n-timed", "n-untimed", "n-folded")}
    equal(shown, {"n-calls": calls, "n-timed": timed, "n-untimed": calls - failed - timed, "n-folded": folded},
          "%s: the calls, timed, untimed and overflow cards are the database's" % name)
    return shown


def nccl_matrix_checks(browser, name):
    """NCCL's matrix, where the page has one: N x N, one-line rows, inside its own scroll box."""
    check(browser.find_elements(By.CSS_SELECTOR, 'nav#toc a[href="#sec-nccl"]'), "%s: NCCL in the table of contents" % name)
    matrix = browser.find_elements(By.ID, "nccl-matrix")
    if not matrix:
        return 0
    n = int(matrix[0].get_attribute("data-gpus"))
    rows = [r for r in matrix[0].find_elements(By.CSS_SELECTOR, "tr") if r.find_elements(By.TAG_NAME, "td")]
    equal((len(rows), {len(r.find_elements(By.TAG_NAME, "td")) for r in rows}), (n, {n}),
          "%s: NCCL's matrix is %d x %d" % (name, n, n))
    heights = {r.size["height"] for r in rows}
    check(max(heights) <= (24 if n > 8 else 60), "%s: NCCL's matrix rows stay one line high (%s px)" % (name, sorted(heights)))
    return n


def nccl_page(browser, work, shots):
    """A job with NCCL (ncclsim.nccl_job): its section checked through the DOM against the database."""
    db = os.path.join(work, "nccl", "job.db")
    os.makedirs(os.path.dirname(db))
    nccl_job(db)
    page = os.path.join(work, "nccl.html")
    proc = cli("report", "--html", page, db)
    equal(proc.returncode, 0, "NCCL job: report --html (%s)" % proc.stderr.strip())
    browser.get("file://" + page)
    page_checks(browser, "NCCL job", 2, scalar(db, "SELECT count(*) FROM processes"))
    equal(nccl_matrix_checks(browser, "NCCL job"), 4, "NCCL job: the matrix has the 4 GPUs of the pairs")
    section = browser.find_element(By.ID, "sec-nccl")
    first = browser.execute_script(
        "const s = document.querySelector('#sec-nccl .nccl-stall'), m = document.getElementById('nccl-matrix');"
        "return !!(s && m && (s.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING));")
    check(first, "NCCL job: the operations that did not finish come first in the section")
    stall = section.find_element(By.CSS_SELECTOR, ".nccl-stall")
    check(stall.get_attribute("data-count") == "2" and stall.get_attribute("data-ranks") == "0,1" and
          "nccl/all-ranks-stuck-in-operation" in stall.find_element(By.CSS_SELECTOR, "code.rule").text and
          stall.find_element(By.CSS_SELECTOR, ".advice").text,
          "NCCL job: the hang is one box: both ranks, its rule and what to do (%s)" % stall.text[:160])
    equal(browser.find_element(By.ID, "n-nccl-stalls").text, "2", "NCCL job: the summary card counts the stall rows")
    equal(browser.find_element(By.ID, "n-nccl-ops").text.replace(",", ""),
          str(scalar(db, "SELECT sum(ops) FROM nccl_totals")), "NCCL job: the summary card counts every finished operation")
    view = query(db, "SELECT src_gpu, dst_gpu, kind, gpu_timed, p50_gbps FROM nccl_pair_bandwidth")
    cells = browser.find_elements(By.CSS_SELECTOR, "#nccl-matrix td[data-src]")
    equal(len(cells), len({(r[0], r[1]) for r in view}), "NCCL job: a cell per device pair of nccl_pair_bandwidth")
    for src, dst in sorted({(r[0], r[1]) for r in view}):
        cell = browser.find_element(By.CSS_SELECTOR, '#nccl-matrix td[data-src="vm:%d"][data-dst="vm:%d"]' % (src, dst))
        kinds = sorted((d.get_attribute("data-kind"), d.text) for d in cell.find_elements(By.CSS_SELECTOR, ".bw"))
        want = sorted((r[2], "%s %s" % (r[2], "untimed" if r[4] is None else "%.3g" % r[4]))
                      for r in view if (r[0], r[1]) == (src, dst))
        equal(kinds, want, "NCCL job: cell %d->%d shows each kind's p50 from the view" % (src, dst))
        best = max((r for r in view if (r[0], r[1]) == (src, dst)), key=lambda r: r[3])
        equal(cell.get_attribute("data-p50"), None if best[4] is None else "%.3f" % best[4],
              "NCCL job: cell %d->%d coloured by its most-timed kind's p50" % (src, dst))
    pair_rows = browser.find_elements(By.CSS_SELECTOR, "#nccl-pair-table tr")
    equal(len(pair_rows) - 1, len(view), "NCCL job: the folded table has every pair")
    funcs = {r.find_elements(By.TAG_NAME, "td")[0].text: int(r.find_elements(By.TAG_NAME, "td")[3].text.replace(",", ""))
             for r in browser.find_elements(By.CSS_SELECTOR, "#nccl-funcs tr") if r.find_elements(By.TAG_NAME, "td")}
    want = dict(query(db, "SELECT func, sum(ops) FROM nccl_totals GROUP BY func"))
    equal(funcs, want, "NCCL job: operations per function as nccl_totals counts them")
    gbps = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[6].text
            for r in browser.find_elements(By.CSS_SELECTOR, "#nccl-funcs tr") if r.find_elements(By.TAG_NAME, "td")}
    # the rows with a GPU time, and the summary buckets whose every operation had one
    rates = dict(query(db, "SELECT func, printf('%.3f', sum(b) * 1.0 / sum(ns)) FROM (SELECT func, bytes AS b, "
                           "gpu_ns AS ns FROM nccl_ops WHERE state = 'done' AND gpu_ns > 0 UNION ALL SELECT func, "
                           "bytes, gpu_ns_total FROM nccl_op_summary WHERE gpu_timed = count) GROUP BY func"))
    equal(gbps, rates, "NCCL job: GPU GB/s per function from the GPU-timed operations")
    equal(len(browser.find_elements(By.CSS_SELECTOR, "#nccl-comms tr")) - 1, 3, "NCCL job: the three communicators")
    browser.execute_script("window.scrollTo(0, document.getElementById('sec-nccl').offsetTop - 8)")
    shot = os.path.join(shots, "report-nccl.png")
    check(browser.save_screenshot(shot) and os.path.getsize(shot) > 10000, "NCCL job: a screenshot (%s)" % shot)


def mapping_matrices(browser, name):
    """The mappings' matrices, where the page has them: each N x N, one-line rows; their hosts."""
    check(browser.find_elements(By.CSS_SELECTOR, 'nav#toc a[href="#sec-mappings"]'), "%s: Mappings in the table of contents" % name)
    hosts = []
    for m in browser.find_elements(By.CSS_SELECTOR, "table.mapping-matrix"):
        n = int(m.get_attribute("data-gpus"))
        rows = [r for r in m.find_elements(By.CSS_SELECTOR, "tr") if r.find_elements(By.TAG_NAME, "td")]
        equal((len(rows), {len(r.find_elements(By.TAG_NAME, "td")) for r in rows}), (n, {n}),
              "%s: %s's mapping matrix is %d x %d" % (name, m.get_attribute("data-host"), n, n))
        check(max(r.size["height"] for r in rows) <= 60, "%s: mapping matrix rows stay one line high" % name)
        hosts.append(m.get_attribute("data-host"))
    return hosts


def mapping_page(browser, work, shots):
    """A job of cross-process mappings (mapsim.mapping_job): its section through the DOM against the database."""
    db = os.path.join(work, "mappings", "job.db")
    os.makedirs(os.path.dirname(db))
    mapping_job(db)
    page = os.path.join(work, "mappings.html")
    proc = cli("report", "--html", page, db)
    equal(proc.returncode, 0, "mapping job: report --html (%s)" % proc.stderr.strip())
    browser.get("file://" + page)
    page_checks(browser, "mapping job", 2, scalar(db, "SELECT count(*) FROM processes"))
    host = scalar(db, "SELECT hostname FROM processes LIMIT 1")
    equal(mapping_matrices(browser, "mapping job"), [host], "mapping job: one host, one matrix")
    view = query(db, "SELECT owner_gpu, accessor_gpu, opened, closed, live, failed FROM mapping_pairs")
    known = [r for r in view if r[0] is not None and r[1] is not None]
    cells = browser.find_elements(By.CSS_SELECTOR, "table.mapping-matrix td[data-owner]")
    got = sorted((c.get_attribute("data-owner"), c.get_attribute("data-accessor"), int(c.get_attribute("data-opened")),
                  int(c.get_attribute("data-closed")), int(c.get_attribute("data-live")),
                  int(c.get_attribute("data-failed")), c.text.split("\n")[0]) for c in cells)
    want = sorted(("%s:%d" % (host, o), "%s:%d" % (host, a), n, c, l, f, str(n)) for o, a, n, c, l, f in known)
    equal(got, want, "mapping job: a cell per pair of known GPUs, its mappings opened, closed, live and failed as "
                     "mapping_pairs counts them")
    tint = {c.get_attribute("data-owner") + ">" + c.get_attribute("data-accessor"): c.get_attribute("class") for c in cells}
    equal(tint, {"%s:%d>%s:%d" % (host, o, host, a): "map-failed" if f else "map-live" if l else "map-closed"
                 for o, a, n, c, l, f in known}, "mapping job: cells tinted by failed calls, then live mappings")
    live_cell = [c for c in cells if c.get_attribute("data-live") != "0"][0]
    check("live" in live_cell.text and "processes" not in live_cell.text and "by rank" in live_cell.get_attribute("title"),
          "mapping job: a live pair's cell says how many, its title who mapped (%s)" % live_cell.get_attribute("title"))
    caption = browser.find_element(By.CSS_SELECTOR, ".mapping-host > b").text
    check("1 failed" in caption and "2 live" in caption, "mapping job: the host's caption counts the failed call "
                                                         "(its owner unknown: no cell) and the live mappings (%s)" % caption)
    rows = browser.find_elements(By.CSS_SELECTOR, "#mapping-pair-table tr")
    equal(len(rows) - 1, len(view), "mapping job: the table has every pair, the failed call's included")
    equal([browser.find_element(By.ID, i).text for i in ("n-mappings", "n-mappings-live", "n-mapping-failures")],
          [str(sum(r[k] for r in view)) for k in (2, 4, 5)], "mapping job: the section's totals")
    equal(browser.find_element(By.ID, "n-card-mappings").text, str(sum(r[2] for r in view)),
          "mapping job: a summary card counts the mappings")
    own = browser.find_elements(By.CSS_SELECTOR, "#mapping-counts tr")
    equal(len(own) - 1, scalar(db, "SELECT count(*) FROM (SELECT 1 FROM mapping_counts GROUP BY api, device)"),
          "mapping job: the own-device counts per call and device")
    browser.execute_script("window.scrollTo(0, document.getElementById('sec-mappings').offsetTop - 8)")
    shot = os.path.join(shots, "report-mappings.png")
    check(browser.save_screenshot(shot) and os.path.getsize(shot) > 10000, "mapping job: a screenshot (%s)" % shot)


def check_scale(browser, work, shots):
    """Databases of a cluster job: 8 and 64 GPUs, and 1000 processes."""
    for name, args in (("8gpu", ["--gpus", "8", "--processes", "16", "--rows", "60000"]),
                       ("64gpu", ["--gpus", "64", "--processes", "4", "--per-host", "4", "--rows", "60000"]),
                       ("1000proc", ["--gpus", "8", "--processes", "1000", "--rows", "30000"])):
        big = os.path.join(work, name + ".db")
        subprocess.run([sys.executable, os.path.join(SOURCE, "scripts/make-bigdb.py"), big] + args, check=True,
                       capture_output=True)
        page = os.path.join(work, name + ".html")
        proc = cli("report", "--html", page, big)
        equal(proc.returncode, 0, "%s: report --html (%s)" % (name, proc.stderr.strip()))
        check(os.path.getsize(page) < 20 << 20, "%s: one file of %.1f MB" % (name, os.path.getsize(page) / 1e6))
        browser.get("file://" + page)
        gpus = int(args[1])
        processes = int(args[3])
        page_checks(browser, name, gpus, processes)
        shown = copy_cards(browser, name, big)
        if name == "8gpu":
            check(shown["n-untimed"] > 0 and shown["n-folded"] > 0,
                  "8gpu: a job with untimed copies and calls in overflow (%s)" % shown)
        n = nccl_matrix_checks(browser, name)
        # a matrix per host of the mappings (make-bigdb.py's NCCL imports and IPC opens), 16 at most
        hosts = mapping_matrices(browser, name)
        with_pairs = scalar(big, "SELECT count(DISTINCT host) FROM mapping_pairs WHERE owner_gpu IS NOT NULL AND "
                                 "accessor_gpu IS NOT NULL")
        check(len(hosts) == min(16, with_pairs) and len(set(hosts)) == len(hosts),
              "%s: a mapping matrix for each of %d hosts, 16 at most (%d)" % (name, with_pairs, len(hosts)))
        if with_pairs > 16:
            check(("%d more hosts" % (with_pairs - 16)) in browser.find_element(By.ID, "mapping-more-hosts").text,
                  "%s: the hosts past 16 are said to be in the table" % name)
        if name == "1000proc":
            check(n == 0 and "too many for a matrix" in browser.find_element(By.ID, "sec-nccl").text,
                  "1000 processes: NCCL's 1000 GPUs in the table, not a matrix")
        else:
            check(n > 0, "%s: NCCL's matrix (%d GPUs)" % (name, n))
        banded(browser, name)
        if name == "1000proc":
            rank_view = browser.find_element(By.ID, "rank-view")
            check(rank_view.get_attribute("open") is None, "1000 processes: the rank table starts folded")
            hosts = browser.find_elements(By.CSS_SELECTOR, "#hosts tr")
            equal(len(hosts) - 1, 125, "1000 processes: a row per host (8 ranks a host)")
            fail = browser.find_element(By.CSS_SELECTOR, "#sec-failures .failure")
            check("ranks" in fail.text and "(900)" in fail.text and "hosts" in fail.text,
                  "1000 processes: a failure group names its ranks and hosts in a line (%s)" % fail.text[:200])
            continue
        # The first pair's detail opened, for the screenshot: real axes with units.
        first = browser.find_element(By.CSS_SELECTOR, "details.pair")
        browser.execute_script("arguments[0].open = true", first)
        titles = [t.text for t in first.find_elements(By.CSS_SELECTOR, "text.axis-title")]
        check(any("GB/s" in t for t in titles) and any("since" in t and "UTC" in t for t in titles),
              "%s: a pair's chart names its axes and units (%s)" % (name, titles))
        browser.execute_script("window.scrollTo(0, document.getElementById('sec-matrix').offsetTop - 8)")
        shot = os.path.join(shots, "report-%s.png" % name)
        check(browser.save_screenshot(shot) and os.path.getsize(shot) > 10000, "%s: a screenshot (%s)" % (name, shot))


db = tempdb()
work = os.path.dirname(db)
cli("run", "--db", db, "--", program("rt_peer"), "basic", RANK="0")
cli("run", "--db", db, "--", program("rt_peer"), "errors", RANK="1")
cli("run", "--db", db, "--", program("rt_peer"), "errors", RANK="1")
cli("run", "--db", db, "--mode", "staged", "--", program("rt_peer"), "basic", RANK="2")
# A thread copying 0->1 with every copy GPU-timed: the pair's charts hold more than 2000 points.
dense_run = cli("run", "--db", db, "--", program("rt_peer"), "threads", "1", "2500", "300", RANK="3",
                P2PGUARD_GPU_TIMING="all")
equal(dense_run.returncode, 0, "a run of 2500 GPU-timed copies 0->1 (%s)" % dense_run.stderr.strip())
run([program("rt_peer"), "crash"], db=db, check=False)  # its spool: imported by report
page = os.path.join(work, "report.html")
proc = cli("report", "--html", page, db)
equal(proc.returncode, 0, "report --html: exit 0 (%s)" % proc.stderr.strip())
html = open(page).read()
check("<script" not in html and "http://" not in html.replace("http-equiv", "") and "https://" not in html,
      "the page loads nothing: no script, no link out")

chromium = shutil.which("chromium") or shutil.which("chromium-browser")
driver_path = shutil.which("chromedriver")
check(chromium and driver_path, "chromium and chromedriver are installed (scripts/install-deps.sh)")
opts = selenium.webdriver.ChromeOptions()
opts.binary_location = chromium
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400",
          "--user-data-dir=" + os.path.join(work, "chromium-profile")):
    opts.add_argument(a)
browser = selenium.webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
try:
    browser.set_page_load_timeout(30)
    browser.get("file://" + page)
    equal(browser.title, "p2pguard report: " + db, "the browser shows the report's title")
    equal(browser.find_element(By.ID, "n-processes").text, str(scalar(db, "SELECT count(*) FROM processes")),
          "the summary card counts every guarded process")
    equal(browser.find_element(By.ID, "n-crashes").text, "1", "the crash imported from the dead spool is counted")
    copy_cards(browser, "2 GPUs", db)
    cell = browser.find_elements(By.CSS_SELECTOR, '#matrix td[data-pair="0-1"] .bw')
    paths = sorted(c.get_attribute("data-path") for c in cell)
    want = sorted(r[0] for r in query(db, "SELECT path FROM peer_bandwidth WHERE src_device = 0 AND dst_device = 1"))
    equal(paths, want, "the matrix cell 0->1 shows each path's bandwidth")
    p50 = scalar(db, "SELECT p50_gbps FROM peer_bandwidth WHERE src_device = 0 AND dst_device = 1 AND path = 'p2p'")
    text = browser.find_element(By.CSS_SELECTOR, '#matrix td[data-pair="0-1"] .bw[data-path="p2p"]').text
    check(("p2p %.3g" % p50) in text, "the matrix shows the measured p50 (%s, %s)" % (text, p50))
    for src, dst in ((0, 1), (1, 0)):
        chart = browser.find_element(By.CSS_SELECTOR, "#pair-%d-%d svg.bw-time" % (src, dst))
        # Only copies with a GPU time, asynchronous or synchronous.
        timed = scalar(db, "SELECT count(*) FROM transfers WHERE src_device = ? AND dst_device = ? AND status = 0 "
                           "AND gpu_ns > 0 AND path IN ('p2p', 'driver', 'staged')", src, dst)
        equal(int(chart.get_attribute("data-points")), timed, "bandwidth over time %d->%d: every timed copy" % (src, dst))
        points = chart.find_elements(By.CSS_SELECTOR, "circle.pt")
        if timed > 2000:
            check(chart.get_attribute("data-drawn") == "percentiles" and not points and
                  len(chart.find_elements(By.CSS_SELECTOR, "rect")) > 1,
                  "bandwidth over time %d->%d: %d copies drawn as percentile bands, no points" % (src, dst, timed))
        else:
            equal(len(points), timed, "bandwidth over time %d->%d: a point per timed copy" % (src, dst))
    banded(browser, "2 GPUs", expect_dense=True)
    bars = browser.find_elements(By.CSS_SELECTOR, "#pair-0-1 svg.sizes rect.bar")
    equal(sum(int(b.get_attribute("data-count")) for b in bars),
          scalar(db, "SELECT count(*) FROM transfers WHERE src_device = 0 AND dst_device = 1 AND bytes > 0"),
          "size histogram: every copy of the pair in a bar")
    check(all(b.size["height"] >= 0 for b in bars) and any(b.size["height"] > 0 for b in bars), "the bars are drawn")
    fails = browser.find_elements(By.CSS_SELECTOR, "#sec-failures .failure")
    equal(len(fails), scalar(db, "SELECT count(*) FROM (SELECT 1 FROM failures GROUP BY api, status, device, peer_device)"),
          "failures: one box per group of identical failures")
    check(all(f.get_attribute("data-count") == "2" for f in fails), "failures: each seen twice, shown once with its count")
    rules = [f.find_element(By.CSS_SELECTOR, "code.rule").text for f in fails]
    check(all(rules) and "cuda/peer-access-already-enabled" in rules, "failures: each with its rule (%s)" % rules)
    check(all(f.find_element(By.CSS_SELECTOR, ".advice").text for f in fails), "failures: advice shown")
    summary = fails[0].find_element(By.TAG_NAME, "summary")
    summary.click()
    check("rt_peer" in fails[0].find_element(By.CSS_SELECTOR, "details pre").text, "failures: the C stack opens on a click")
    crash = browser.find_element(By.CSS_SELECTOR, "#sec-crashes .crash")
    check("signal 11" in crash.text, "crashes: the SIGSEGV (%s)" % crash.text)
    ranks = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#processes tr td:nth-child(3)")]
    check({"0", "1", "2"} <= set(ranks), "processes and ranks table (%s)" % ranks)
    stalls_text = browser.find_element(By.ID, "sec-stalls").text
    check("No stall was recorded" in stalls_text, "stalls: none recorded, and the page says so (%s)" % stalls_text)
    page_checks(browser, "2 GPUs", 2, scalar(db, "SELECT count(*) FROM processes"))
    shots = os.environ.get("P2PG_SCREENSHOT_DIR") or work
    shot = os.path.join(shots, "report-2gpu.png")
    check(browser.save_screenshot(shot) and os.path.getsize(shot) > 10000, "a screenshot of the rendered page (%s)" % shot)
    check_scale(browser, work, shots)
    nccl_page(browser, work, shots)
    mapping_page(browser, work, shots)
finally:
    browser.quit()
done()
