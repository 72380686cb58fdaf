#!/usr/bin/env python3
"""Every Prometheus configuration shown in the README and docs/outputs.md is one Prometheus accepts.

    scripts/check-doc-prometheus.py [ROOT]

Reads README.md and docs/outputs.md under ROOT (default: the repository this script is in), takes
each fenced ```yaml block whose top-level keys are those of a Prometheus configuration
(scrape_configs, global, rule_files, ...) and runs `promtool check config` on it (promtool: Debian's
prometheus, installed by scripts/install-deps.sh). Each of the two files must show at least one,
so that the check cannot pass by finding none. Prints `file:line: ...` for each problem and exits 1
if there is one (test `doc-prometheus`, suite `style`).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
DOCS = ["README.md", "docs/outputs.md"]
# The top-level sections of Prometheus's configuration file.
PROMETHEUS_KEYS = {"global", "scrape_configs", "scrape_config_files", "rule_files", "alerting", "remote_write",
                   "remote_read", "storage", "tracing"}


def yaml_blocks(path):
    """(first line number, text) of each ```yaml block."""
    block, start = None, 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if block is None:
                if re.match(r"^\s*```\s*ya?ml\s*$", line):
                    block, start = [], n + 1
            elif re.match(r"^\s*```\s*$", line):
                yield start, "".join(block)
                block = None
            else:
                block.append(line)


def main():
    problems = []
    promtool = shutil.which("promtool")
    if not promtool:
        print("promtool not found (Debian package prometheus: scripts/install-deps.sh)")
        return 1
    with tempfile.TemporaryDirectory(prefix="p2pg-doc-prometheus-") as work:
        for doc in DOCS:
            found = 0
            for line, text in yaml_blocks(os.path.join(ROOT, doc)):
                keys = set(re.findall(r"^([A-Za-z_]+):", text, re.M))
                if not keys & PROMETHEUS_KEYS:
                    continue
                found += 1
                config = os.path.join(work, "prometheus.yml")
                with open(config, "w") as f:
                    f.write(text)
                r = subprocess.run([promtool, "check", "config", config], capture_output=True, text=True)
                if r.returncode != 0:
                    problems.append("%s:%d: promtool check config: %s"
                                    % (doc, line, (r.stdout + r.stderr).strip().replace("\n", " | ")))
                else:
                    print("%s:%d: a Prometheus configuration promtool accepts" % (doc, line))
            if not found:
                problems.append("%s: no ```yaml block with a Prometheus configuration" % doc)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
