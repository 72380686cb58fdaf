"""trace in an importer of the format that is not ours: speedscope (npm, pinned; installed by
scripts/install-deps.sh into tests/.node) opens the Chrome trace-event JSON in Debian's headless
Chromium, offline, the way speedscope's own command line hands it a file (a script calling
speedscope.loadFileFromBase64, named in the page's #localProfilePath=). The test reads what
speedscope imported from its DOM: a profile per track ("process_name (pid P), thread_name (tid T)")
with the track's total time, and per track, in its Sandwich table, every slice with its args and
duration. It takes a screenshot (P2PG_SCREENSHOT=path keeps it, as docs/trace-speedscope.png was
made). The database has NCCL's operations too (the simulated NCCL), each a slice on its rank's
communicator's track, and cross-process mappings (mapsim.py: a VMM import with its map nested in it,
an IPC open never closed), each a slice on its process's mappings track."""
import os
import sys

from harness import *

use_system_python("selenium.webdriver")
import selenium.webdriver

import base64
import json
import re
import shutil
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

SPEEDSCOPE = os.path.join(SOURCE, "tests/.node/node_modules/speedscope/dist/release/index.html")
UNITS_US = {"ns": 1e-3, "\u00b5s": 1.0, "ms": 1e3, "s": 1e6}


def microseconds(text):
    """speedscope's duration text ("807.36µs", "3.47ms", two decimals) in microseconds."""
    m = re.match(r"([0-9.]+)(ns|\u00b5s|ms|s)\b", text)
    return (float(m.group(1)) * UNITS_US[m.group(2)], 0.006 * UNITS_US[m.group(2)]) if m else (None, 0)


def same_duration(text, us):
    value, rounding = microseconds(text)
    return value is not None and abs(value - us) <= rounding + 1e-6 * us


db = tempdb()
work = os.path.dirname(db)
cli("run", "--db", db, "--", program("rt_peer"), "basic", RANK="0")
cli("run", "--db", db, "--", program("rt_peer"), "errors", RANK="1")
cli("run", "--db", db, "--mode", "staged", "--", program("rt_peer"), "basic", RANK="2")
# Two ranks of NCCL (the simulated NCCL under the guard): sends and receives, a track per rank's
# communicator, their operations in flight together on lanes.
sys.path.insert(0, os.path.join(SOURCE, "tests/nccl"))
from ncclsim import sim_start  # noqa: E402
ranks = [sim_start(["--rank", r, "--nranks", 2, "--comm", "0000000000d44d4d", "--device", r, "sendrecv", 2,
                    65536, 1 - r], db=db, RANK=r + 3) for r in range(2)]
for p in ranks:
    p.communicate(timeout=120)
    check(p.returncode == 0, "an NCCL rank ran under the guard")
# Cross-process mappings: rank 6 imports and maps rank 5's memory (the map nested in the import),
# rank 8 opens rank 7's and never closes it.
from mapsim import ipc_pair, vmm_pair  # noqa: E402
vmm_pair(db, 5, 0, 6, 1)
ipc_pair(db, 7, 1, 8, 0, XPROC_KEEP="1")
trace_path = os.path.join(work, "job.trace.json")
proc = cli("trace", db, "-o", trace_path)
equal(proc.returncode, 0, "trace: exit 0 (%s)" % proc.stderr.strip())
events = json.load(open(trace_path))["traceEvents"]
process_names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
tracks = {}
for e in events:
    if e["ph"] == "X":
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
equal(sum(len(t) for t in tracks.values()),
      scalar(db, "SELECT (SELECT count(*) FROM transfers) + (SELECT count(*) FROM nccl_ops WHERE state = 'done') + "
                 "(SELECT count(DISTINCT process_id || ':' || mapping_id) FROM peer_mappings WHERE status = 0 AND "
                 "event IN ('import', 'map', 'access'))"),
      "the trace has a slice per transfer, per NCCL operation and per mapping in the database")
check(len(process_names) == 9 and len(tracks) >= 8, "9 processes, %d tracks of slices" % len(tracks))
check(sum(thread_names[k] == "mappings" for k in tracks) == 2 and
      any(e["name"].endswith("(live)") for k in tracks for e in tracks[k]),
      "a mappings track for each of the two processes that mapped, a mapping never closed among them")
check(sum(thread_names[k].startswith("NCCL comm 0000000000d44d4d") for k in tracks) >= 2,
      "a track (or more: lanes) per NCCL rank's communicator")

check(os.path.exists(SPEEDSCOPE), "speedscope's release build is installed (scripts/install-deps.sh: %s)" % SPEEDSCOPE)
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
driver_path = shutil.which("chromedriver")
check(chromium and driver_path, "chromium and chromedriver are installed (scripts/install-deps.sh)")
if not (os.path.exists(SPEEDSCOPE) and chromium and driver_path):
    done()

# What speedscope's command line (its bin/cli.mjs) writes for a profile it is given, and the URL it opens.
loader = os.path.join(work, "job.trace.js")
with open(loader, "w") as f:
    f.write("speedscope.loadFileFromBase64(%s, %s)" % (
        json.dumps(os.path.basename(trace_path)), json.dumps(base64.b64encode(open(trace_path, "rb").read()).decode())))

opts = selenium.webdriver.ChromeOptions()
opts.binary_location = chromium
# speedscope draws with WebGL: SwiftShader, Chromium's software renderer, stands in for a GPU.
for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,420",
          "--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
          "--user-data-dir=" + os.path.join(work, "chromium-profile")):
    opts.add_argument(a)
opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
browser = selenium.webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
PROFILE_ROWS = "//input[@placeholder='Filter...']/ancestor::div[2]//table//tbody/tr"
PROFILE_INDEX = "//input[@placeholder='Filter...']/ancestor::div[@style][1]/preceding-sibling::span/span"
SANDWICH_ROWS = "//table[not(thead)]//tr"


def keys(k):
    """speedscope's keyboard: 1 Time Order, 3 Sandwich, n next profile."""
    ActionChains(browser).send_keys(k).perform()


try:
    browser.set_page_load_timeout(30)
    browser.get("file://" + SPEEDSCOPE + "#localProfilePath=" + loader)
    try:
        WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.XPATH, PROFILE_ROWS) or
                                         "Something went wrong" in b.find_element(By.TAG_NAME, "body").text)
    except TimeoutException:
        pass
    log = [e["message"] for e in browser.get_log("browser")]
    check(any("Importing as Trace Event Format profile" in m for m in log),
          "speedscope recognised the file as the Trace Event Format (%s)" % [m[-80:] for m in log])
    check(not [m for m in log if "rror" in m] and "Something went wrong" not in browser.find_element(By.TAG_NAME, "body").text,
          "no import error, on the page or in the console")
    equal(browser.title, "job.trace.json - speedscope", "speedscope shows the file it loaded")

    # A profile per track with slices, named after our metadata, in our order (ranks), each as
    # long as the sum of its slices.
    order = sorted(tracks)
    want = ["%s (pid %d), %s (tid %d)" % (process_names[p], p, thread_names[(p, t)], t) for p, t in order]
    rows = [[td.get_attribute("textContent") for td in r.find_elements(By.TAG_NAME, "td")]
            for r in browser.find_elements(By.XPATH, PROFILE_ROWS)]
    equal([r[1] for r in rows], want, "the profile selector lists each track by process (rank) and track name")
    check(any(n.startswith("rank 0 pid ") for n in want) and any("GPU 0->1" in n for n in want) and
          any(n.startswith("rank 3 pid ") and "NCCL comm 0000000000d44d4d" in n for n in want) and
          any(n.startswith("rank 6 pid ") and ", mappings (tid" in n for n in want),
          "names such as 'rank 0 pid ...', 'GPU 0->1', 'NCCL comm ...' and 'mappings'")

    def outermost(slices):
        """The time of a track's slices not inside another (a mapping's map nests in its import)."""
        return sum(e["dur"] for e in slices if not any(o is not e and o["ts"] <= e["ts"] and
                                                          e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in slices))

    sums = [outermost(tracks[k]) for k in order]
    check(len(rows) == len(order) and all(same_duration(r[2], s) for r, s in zip(rows, sums)),
          "each profile's total weight is its track's GPU/host time, nested slices within their outer one's "
          "(%s vs %s)" % ([r[2] for r in rows], sums))

    # Every slice of every track, by name and args, with its duration: the Sandwich table. The
    # page redraws after each key, so each track is read until it shows (or 15 s pass).
    def sandwich(key):
        got = {}
        for r in browser.find_elements(By.XPATH, SANDWICH_ROWS):
            cells = [td.get_attribute("textContent") for td in r.find_elements(By.TAG_NAME, "td")]
            got[cells[2]] = cells[0]
        missing = []
        for e in tracks[key]:
            symbol = next((s for s in got if s.startswith(e["name"] + " {") and
                           json.loads(s[len(e["name"]) + 1:]) == e["args"]), None)
            if symbol is None or not same_duration(got[symbol], e["dur"]):
                missing.append((e["name"], e["args"].get("transfer_id") or e["args"].get("nccl_op_id") or
                                e["args"].get("peer_mappings_id"), e["dur"],
                                symbol and got[symbol]))
        return got, missing

    keys("3")
    for i, key in enumerate(order):
        shown = "(%d/%d)" % (i + 1, len(order))
        try:
            WebDriverWait(browser, 15, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
                lambda b: b.find_element(By.XPATH, PROFILE_INDEX).text == shown and
                len(sandwich(key)[0]) == len(tracks[key]) and not sandwich(key)[1])
        except TimeoutException:
            pass
        index = browser.find_element(By.XPATH, PROFILE_INDEX).text
        got, missing = sandwich(key)
        check(index == shown and len(got) == len(tracks[key]) and not missing,
              "track %s: speedscope has its %d slices with their args and durations (%d shown; not: %s)" % (
                  index, len(tracks[key]), len(got), missing))
        keys("n")

    # The picture: rank 0's first track in the Time Order view, a slice's tooltip shown.
    browser.refresh()
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.XPATH, PROFILE_ROWS))
    canvas = browser.find_element(By.TAG_NAME, "canvas")
    ActionChains(browser).move_to_element_with_offset(canvas, -canvas.size["width"] // 2 + 120,
                                                      -canvas.size["height"] // 2 + 150).perform()
    try:  # the slice's tooltip: the only page text (not canvas) with a slice's name in this view
        WebDriverWait(browser, 5).until(lambda b: " {\"bytes\":" in b.find_element(By.TAG_NAME, "body").text)
    except TimeoutException:
        pass
    shot = os.environ.get("P2PG_SCREENSHOT") or os.path.join(work, "trace.png")
    check(browser.save_screenshot(shot) and 10000 < os.path.getsize(shot) <= 200000, "a screenshot of speedscope (%s)" % shot)
finally:
    browser.quit()
done()
