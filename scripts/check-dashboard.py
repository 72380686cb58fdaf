#!/usr/bin/env python3
"""Checks the Grafana dashboard against what `p2pguard metrics` really writes.

    scripts/check-dashboard.py DASHBOARD.json METRICS.prom

What a dashboard needs to load and show something: Grafana's dashboard model (schemaVersion,
unique panel ids, grid positions within 24 columns that do not overlap, a Prometheus datasource
on every panel and target, a refId and an expression per target, template variables the
expressions use); PromQL that parses (every expression, Grafana's variables given example values,
checked by `promtool check rules` as recording rules); and only metric names and labels that the
exposition given (made by `p2pguard metrics` from a database) has, in the expressions, the legends
and the variables' label_values() queries. The exposition itself must label every series that
carries dcgm-exporter's UUID with its host label as dcgm-exporter spells it (Hostname): the GPU
panels group by (Hostname, UUID), and a join with dcgm-exporter's series matches on both. Prints
one line per problem and exits 1, or "dashboard ok: N panels, M expressions" and 0.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m"}
# dcgm-exporter's label of the host on its GPU series (gpu, UUID, pci_bus_id, device, modelName,
# Hostname): a join on (Hostname, UUID) needs ours spelt the same.
DCGM_HOST, DCGM_GPU = "Hostname", "UUID"


def families(text):
    """{family name: set of label names} of an exposition, counters by their _total samples."""
    found = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            m = re.match(r"# TYPE (\S+) ", line)
            if m:
                found.setdefault(m.group(1), set())
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
        if m:
            labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
            found.setdefault(m.group(1), set()).update(labels)
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    problems = []
    dash = json.load(open(sys.argv[1]))
    have = families(open(sys.argv[2]).read())
    say = problems.append

    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
        say("schemaVersion missing or older than 36 (Grafana 9)")
    for key in ("title", "uid", "panels", "templating"):
        if key not in dash:
            say("no %s" % key)
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource" or variables["datasource"].get("query") != "prometheus":
        say("no Prometheus datasource variable named datasource")
    for name, v in variables.items():
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else q or ""
        m = re.fullmatch(r"\s*label_values\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*", q)
        if not m:
            say("variable %s: its query is not label_values(METRIC, LABEL): %s" % (name, q))
        elif m.group(1) not in have:
            say("variable %s: %s is not written by p2pguard metrics" % (name, m.group(1)))
        elif have[m.group(1)] and m.group(2) not in have[m.group(1)]:
            say("variable %s: %s has no label %s" % (name, m.group(1), m.group(2)))
    for name, labels in sorted(have.items()):
        if DCGM_GPU in labels and DCGM_HOST not in labels:
            say("%s has dcgm-exporter's %s but not its host label %s: a join on (%s, %s) with "
                "dcgm-exporter's series finds nothing" % (name, DCGM_GPU, DCGM_HOST, DCGM_HOST, DCGM_GPU))
    ids, cells, exprs, legends = set(), {}, [], []
    for p in dash.get("panels", []):
        where = "panel %s (%s)" % (p.get("id"), p.get("title"))
        if not isinstance(p.get("id"), int) or p["id"] in ids:
            say("%s: id missing or repeated" % where)
        ids.add(p.get("id"))
        if p.get("type") not in ("timeseries", "table", "stat", "gauge", "bargauge", "heatmap", "text"):
            say("%s: unknown type %s" % (where, p.get("type")))
        if not p.get("title"):
            say("%s: no title" % where)
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in "hwxy") or g["x"] < 0 or g["x"] + g["w"] > 24 or g["h"] < 1:
            say("%s: gridPos outside the 24-column grid: %s" % (where, g))
        else:
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    if (x, y) in cells:
                        say("%s: overlaps panel %s" % (where, cells[(x, y)]))
                        break
                    cells[(x, y)] = p.get("id")
        if p.get("datasource", {}).get("uid") != "${datasource}":
            say("%s: datasource is not the ${datasource} variable" % where)
        refs = set()
        for t in p.get("targets", []):
            if not t.get("refId") or t["refId"] in refs:
                say("%s: target without a refId of its own" % where)
            refs.add(t.get("refId"))
            if not t.get("expr"):
                say("%s: target %s has no expr" % (where, t.get("refId")))
                continue
            exprs.append((where, t["expr"]))
            legends.append((where, t["expr"], t.get("legendFormat", "")))
        if p.get("type") != "text" and not p.get("targets"):
            say("%s: no target" % where)

    for where, expr in exprs:
        for var in re.findall(r"\$\{?(\w+)", expr):
            if var not in variables and "$" + var not in GRAFANA_VARIABLES and "$__" + var not in GRAFANA_VARIABLES \
                    and not var.startswith("__"):
                say("%s: uses $%s, which the dashboard does not define" % (where, var))
        for name in set(re.findall(r"\b(p2pguard_[a-z_]+)\b", expr)):
            if name not in have:
                say("%s: %s is not written by p2pguard metrics" % (where, name))
                continue
            if not have[name]:
                continue  # a family without samples in this exposition: its labels unknown here
            for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
                for label in (l.strip() for l in group.split(",")):
                    if label and label not in have[name]:
                        say("%s: %s has no label %s" % (where, name, label))
            for label in re.findall(r"(\w+)\s*=~?\s*\"", expr):
                if label not in have[name]:
                    say("%s: %s has no label %s" % (where, name, label))

    # A legend names labels the series it draws carry: those it groups by, else its metrics'.
    for where, expr, legend in legends:
        labels = {l.strip() for group in re.findall(r"\bby\s*\(([^)]*)\)", expr) for l in group.split(",")}
        labels.discard("")
        if not labels:
            for name in set(re.findall(r"\b(p2pguard_[a-z_]+)\b", expr)):
                labels |= have.get(name, set())
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend):
            if labels and label not in labels:
                say("%s: its legend names %s, which its series do not carry" % (where, label))

    # PromQL syntax: the expressions as recording rules, Grafana's variables with example values.
    promtool = shutil.which("promtool")
    if not promtool:
        say("promtool not found (Debian package prometheus): PromQL not checked")
    else:
        with tempfile.TemporaryDirectory() as d:
            rules = os.path.join(d, "rules.yml")
            with open(rules, "w") as f:
                f.write("groups:\n- name: dashboard\n  rules:\n")
                for k, (where, expr) in enumerate(exprs):
                    e = expr
                    for var, value in GRAFANA_VARIABLES.items():
                        e = e.replace(var, value)
                    e = re.sub(r"\$\{?\w+\}?", ".*", e)
                    f.write("  - record: dashboard:expr_%d\n    expr: %s\n" % (k, json.dumps(e)))
            r = subprocess.run([promtool, "check", "rules", rules], capture_output=True, text=True)
            if r.returncode != 0:
                say("promtool check rules: " + (r.stdout + r.stderr).strip().replace("\n", " | "))

    for p in problems:
        print(p)
    if problems:
        return 1
    print("dashboard ok: %d panels, %d expressions" % (len(ids), len(exprs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
