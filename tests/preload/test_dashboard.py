"""The Grafana dashboard in docs/grafana is built on what `p2pguard metrics` writes: its model, its
PromQL (promtool) and every metric name and label it uses, checked by scripts/check-dashboard.py
against the metrics of a cluster job's database (scripts/make-bigdb.py); and a dashboard that names
a metric the command does not write is caught."""
import json
import os
import sys

from harness import *

work = tempfolder()
db = os.path.join(work, "job.db")
subprocess.run([sys.executable, os.path.join(SOURCE, "scripts/make-bigdb.py"), db, "--rows", "5000",
                "--processes", "24"], check=True, capture_output=True)
prom = os.path.join(work, "p2pguard.prom")
equal(cli("metrics", db, "-o", prom).returncode, 0, "metrics -o")
dashboard = os.path.join(SOURCE, "docs/grafana/p2pguard-dashboard.json")
check_script = os.path.join(SOURCE, "scripts/check-dashboard.py")
proc = subprocess.run([sys.executable, check_script, dashboard, prom], capture_output=True, text=True)
check(proc.returncode == 0 and proc.stdout.startswith("dashboard ok: 22 panels"),
      "the shipped dashboard passes (%s)" % (proc.stdout + proc.stderr).strip())
# NCCL's panels are checked label by label only where their families have samples: the job's
# database has NCCL operations, stalls and unreported operations (make-bigdb.py).
import re
text = open(prom).read()
used = set(re.findall(r"\b(p2pguard_nccl_[a-z_]+)\b", open(dashboard).read()))
check(len(used) >= 6 and all(re.search(r"^%s\{" % n, text, re.M) for n in used),
      "every NCCL family the dashboard uses has samples in the exposition (%s)" % sorted(used))
# So are the cross-process mappings' panels: the job's database has NCCL's cuMem imports, PyTorch's
# IPC opens, live mappings, failed calls and own-device counts (make-bigdb.py).
used = set(re.findall(r"\b(p2pguard_(?:peer_mapping|own_device_mapping)[a-z_]*)\b", open(dashboard).read()))
check(len(used) >= 6 and all(re.search(r"^%s\{" % n, text, re.M) for n in used),
      "every mapping family the dashboard uses has samples in the exposition (%s)" % sorted(used))
# The check catches a wrong name, a wrong label and PromQL that does not parse.
bad = json.load(open(dashboard))
bad["panels"][0]["targets"][0]["expr"] = "sum by (gpu_name) (rate(p2pguard_peer_copy_bytes[5m])"
path = os.path.join(work, "bad.json")
json.dump(bad, open(path, "w"))
proc = subprocess.run([sys.executable, check_script, path, prom], capture_output=True, text=True)
check(proc.returncode == 1 and "p2pguard_peer_copy_bytes is not written" in proc.stdout and
      "promtool check rules" in proc.stdout, "a broken dashboard is caught (%s)" % proc.stdout.strip())
bad["panels"][0]["targets"][0]["expr"] = "sum by (gpu_name) (rate(p2pguard_peer_copy_bytes_total[5m]))"
json.dump(bad, open(path, "w"))
proc = subprocess.run([sys.executable, check_script, path, prom], capture_output=True, text=True)
check(proc.returncode == 1 and "has no label gpu_name" in proc.stdout, "a label the metric lacks is caught")
# ...in a legend and in the host variable's query too (the host label is dcgm-exporter's Hostname).
bad = json.load(open(dashboard))
bad["panels"][0]["targets"][0]["legendFormat"] = "{{hostname}} {{src}}->{{dst}}"
host = next(v for v in bad["templating"]["list"] if v["type"] == "query")
host["query"]["query"] = "label_values(p2pguard_processes_total, hostname)"
json.dump(bad, open(path, "w"))
proc = subprocess.run([sys.executable, check_script, path, prom], capture_output=True, text=True)
check(proc.returncode == 1 and "legend names hostname" in proc.stdout and
      "p2pguard_processes_total has no label hostname" in proc.stdout,
      "a legend's or a variable's label the metrics lack is caught (%s)" % proc.stdout.strip())
# An exposition whose GPU series spell the host otherwise than dcgm-exporter cannot be joined with
# its series on (Hostname, UUID): caught.
lower = os.path.join(work, "lower.prom")
open(lower, "w").write(text.replace("Hostname=", "hostname="))
proc = subprocess.run([sys.executable, check_script, dashboard, lower], capture_output=True, text=True)
check(proc.returncode == 1 and "p2pguard_peer_copies_total has dcgm-exporter's UUID but not its host label Hostname"
      in proc.stdout, "GPU series without dcgm-exporter's Hostname label are caught")
done()
