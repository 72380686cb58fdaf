"""report --html in a real browser: Debian's headless Chromium (through chromedriver and
python3-selenium) opens the page from a file, offline; the test reads the page's own DOM and takes
a screenshot (P2PG_SCREENSHOT=path keeps it, as docs/report.png was made)."""
import os
import sys

from harness import *

use_system_python("selenium.webdriver")
import selenium.webdriver

import shutil
import sqlite3
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


db = tempdb()
work = os.path.dirname(db)
cli("run", "--db", db, "--", program("rt_peer"), "basic", RANK="0")
cli("run", "--db", db, "--", program("rt_peer"), "errors", RANK="1")
cli("run", "--db", db, "--", program("rt_peer"), "errors", RANK="1")
cli("run", "--db", db, "--mode", "staged", "--", program("rt_peer"), "basic", RANK="2")
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
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1600",
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
    cell = browser.find_elements(By.CSS_SELECTOR, '#matrix td[data-pair="0-1"] .bw')
    paths = sorted(c.get_attribute("data-path") for c in cell)
    want = sorted(r[0] for r in query(db, "SELECT path FROM peer_bandwidth WHERE src_device = 0 AND dst_device = 1"))
    equal(paths, want, "the matrix cell 0->1 shows each path's bandwidth")
    p50 = scalar(db, "SELECT p50_gbps FROM peer_bandwidth WHERE src_device = 0 AND dst_device = 1 AND path = 'p2p'")
    text = browser.find_element(By.CSS_SELECTOR, '#matrix td[data-pair="0-1"] .bw[data-path="p2p"]').text
    check(("p2p %.3g" % p50) in text, "the matrix shows the measured p50 (%s, %s)" % (text, p50))
    points = browser.find_elements(By.CSS_SELECTOR, "#pair-0-1 svg.bw-time circle.pt")
    # Only copies whose copy time is known: GPU-timed and synchronous ones (gpu_ns is set for both).
    timed = scalar(db, "SELECT count(*) FROM transfers WHERE src_device = 0 AND dst_device = 1 AND status = 0 AND gpu_ns > 0 AND path IN ('p2p', 'driver', 'staged')")
    equal(len(points), timed, "bandwidth over time: a point per timed copy of the pair")
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
    widths = browser.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    check(widths[0] <= widths[1], "the page fits the window's width: no sideways scrolling (%s)" % widths)
    resources = browser.execute_script("return performance.getEntriesByType('resource').length")
    equal(resources, 0, "the page fetched nothing")
    shot = os.environ.get("P2PG_SCREENSHOT") or os.path.join(work, "report.png")
    check(browser.save_screenshot(shot) and os.path.getsize(shot) > 10000, "a screenshot of the rendered page (%s)" % shot)
finally:
    browser.quit()
done()
