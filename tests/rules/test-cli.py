#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The rules and explain commands, run the way a user runs them: exit statuses, the
"FILE:LINE: message" lines and what explain prints first.

    test-cli.py RULES_CLI RULES_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

cli, rules_dir = sys.argv[1:3]
failures = 0


def run(*args, stdin=None, env_extra=None):
    env = dict(os.environ)
    env.pop("P2PGUARD_RULES", None)
    env.update(env_extra or {})
    p = subprocess.run([cli] + list(args), input=stdin, capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def check(what, cond, output=""):
    global failures
    print("%s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        failures += 1
        sys.stdout.write(output if output.endswith("\n") or not output else output + "\n")


USER_RULE = """{
  "id": "site/fabric-restart",
  "signature": "our nodes lose the fabric after a firmware update",
  "root_cause": "The site's firmware update restarts the NVSwitches.",
  "codes": [],
  "aliases": ["firmware update finished"],
  "workarounds": [{"action": "Restart nvidia-fabricmanager", "how": "systemctl restart nvidia-fabricmanager", "success_rate": 0.9}],
  "dead_ends": [{"action": "Rebooting only the VM", "why_fails": "The switches are outside it.", "fail_rate": 0.9}],
  "official_doc_url": "https://example.org/runbook",
  "examples": {"matches": [{"text": "firmware update finished"}], "near_misses": [{"text": "firmware"}]}
}
"""

rc, out, err = run("rules", "validate")
check("validate: the builtin set is clean", rc == 0 and out.endswith(" 0 problems\n"), out + err)

rc, out, err = run("rules", "validate", rules_dir)
check("validate: the source folder is clean", rc == 0 and " 0 problems" in out, out + err)

with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "site"))
    with open(os.path.join(tmp, "site", "fabric-restart.json"), "w") as f:
        f.write(USER_RULE)
    rc, out, err = run("rules", "validate", "--with-builtin", tmp)
    check("validate --with-builtin: a good user rule", rc == 0, out + err)

    broken = os.path.join(tmp, "site", "broken.json")
    with open(broken, "w") as f:
        f.write('{\n  "id": "site/broken",\n  "signature": 3\n}\n')
    rc, out, err = run("rules", "validate", tmp)
    lines = out.splitlines()
    check("validate: problems give status 1", rc == 1, out + err)
    check("validate: FILE:LINE: message",
          "%s:3: field \"signature\" must be a string, not a number" % broken in lines, out)
    check("validate: summary", lines[-1].startswith("1 rule loaded, ") and "problems" in lines[-1],
          out)

    # A regex whose repetitions glibc's regcomp() would spell out into gigabytes, and a comma
    # missing at the end of line 2 (found at the next member, line 3).
    greedy = os.path.join(tmp, "site", "greedy.json")
    greedy_text = USER_RULE.replace("site/fabric-restart", "site/greedy").replace(
        '"aliases":', '"regex": "firmware c%s",\n  "aliases":' % ("+" * 27))
    greedy_line = [n for n, l in enumerate(greedy_text.split("\n"), 1) if '"regex"' in l][0]
    with open(greedy, "w") as f:
        f.write(greedy_text)
    comma = os.path.join(tmp, "site", "comma.json")
    with open(comma, "w") as f:
        f.write('{\n  "id": "site/comma"\n  "signature": "x"\n}\n')
    rc, out, err = run("rules", "validate", tmp)
    lines = out.splitlines()
    check("validate: a regex too large for regcomp() is refused before it runs",
          rc == 1 and "%s:%d: regex too large: its repetitions expand it to about 1.34e+08 "
          "elements (at most 10000)" % (greedy, greedy_line) in lines, out + err)
    check("validate: a syntax error in jansson's words, at its line",
          "%s:3: syntax error: '}' expected near '\"signature\"'" % comma in lines, out)
    os.unlink(greedy)
    os.unlink(comma)

    rc, out, err = run("explain", "firmware update finished", env_extra={"P2PGUARD_RULES": tmp})
    check("explain: P2PGUARD_RULES adds rules", rc == 0 and out.startswith("site/fabric-restart\n"),
          out + err)
    check("explain: a broken user rule is reported on stderr",
          "%s:3: field \"signature\" must be a string" % broken in err, err)

# A text example of several lines is judged as `explain` answers it: a log, line by line, the
# first failure first. Read as one text, the longer wording of the second rule would win.
def site_rule(rule_id, regex, example, extra=""):
    return USER_RULE.replace("site/fabric-restart", rule_id).replace(
        '"aliases": ["firmware update finished"],', '"regex": "%s",%s' % (regex, extra)).replace(
        '"matches": [{"text": "firmware update finished"}]', '"matches": [{"text": %s}]' % json.dumps(example))


with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "site"))
    log = "widget alpha lost its peer\nwidget beta lost its peer mapping for good\n"
    with open(os.path.join(tmp, "site", "alpha.json"), "w") as f:
        f.write(site_rule("site/alpha", "widget alpha lost its peer", log))
    with open(os.path.join(tmp, "site", "beta.json"), "w") as f:
        f.write(site_rule("site/beta", "widget beta lost its peer mapping for good",
                          "widget beta lost its peer mapping for good"))
    rc, out, err = run("rules", "validate", tmp)
    check("validate: a log example is judged by explain's answer (its first line's rule)",
          rc == 0 and out.endswith("2 rules loaded, 0 problems\n"), out + err)
    rc, out, err = run("explain", "-", stdin=log, env_extra={"P2PGUARD_RULES": tmp})
    check("explain: the same log is answered by its first line's rule",
          rc == 0 and "\nFirst: line 1 (site/alpha)" in out, out + err)
    with open(os.path.join(tmp, "site", "beta.json"), "w") as f:
        f.write(site_rule("site/beta", "widget beta lost its peer mapping for good", log))
    rc, out, err = run("rules", "validate", tmp)
    check("validate: a log example another line's rule answers first is a problem",
          rc == 1 and "beta.json" in out and "is explained first by site/alpha, not this rule" in out,
          out + err)

    # A traceback pasted without its "Traceback" line: its frames still name what the
    # exception's line is about, for explain and for validate alike.
    tail = ('  File "/opt/app/widgetlib.py", line 12, in connect\n    peer.open()\n'
            'WidgetError: handle refused\n')
    with open(os.path.join(tmp, "site", "beta.json"), "w") as f:
        f.write(site_rule("site/beta", "WidgetError: handle refused", tail,
                          ' "context": {"file": ["widgetlib.py"]},'))
    rc, out, err = run("rules", "validate", tmp)
    check("validate: a traceback's tail names its frames' files", rc == 0, out + err)
    rc, out, err = run("explain", "-", stdin=tail, env_extra={"P2PGUARD_RULES": tmp})
    check("explain: a traceback without its first line is read with its frames",
          rc == 0 and "\n  line 3: site/beta\n" in out, out + err)
    rc, out, err = run("explain", "-", stdin="WidgetError: handle refused\n",
                       env_extra={"P2PGUARD_RULES": tmp})
    check("explain: without the frame the line names no file of the rule's context",
          rc == 1, out + err)

rc, out, err = run("rules", "validate", "/nonexistent/rules")
check("validate: an unreadable folder is status 2", rc == 2 and "/nonexistent/rules" in err, err)

rc, out, err = run("rules", "list")
check("list", rc == 0 and "cuda/peer-access-unsupported-by-hardware" in out
      and "217" in out, out + err)

rc, out, err = run("rules", "show", "tensorflow/gpu-peer-access-error")
check("show", rc == 0 and '"id": "tensorflow/gpu-peer-access-error"' in out, out + err)
rc, out, err = run("rules", "show", "no/such-rule")
check("show: unknown id", rc == 1, out + err)
rc, out, err = run("rules", "frobnicate")
check("rules: unknown subcommand", rc == 2, out + err)

rc, out, err = run("explain",
                   "RuntimeError: CUDA error: peer access is not supported between these two devices")
check("explain: a PyTorch line", rc == 0 and out.startswith("pytorch/"), out + err)
check("explain: sections", all(s in out for s in ("Root cause:", "What to do:", "Dead ends:",
                                                  "Documentation: https://")), out)

# A step meant for one cause says which (the rule's "condition").
rc, out, err = run("explain", "transport/p2p.cc:863 NCCL WARN Cuda failure 1 'invalid argument'")
check("explain: a workaround's condition is printed",
      rc == 0 and "\n       When: the failing line is 'Cuda failure 'invalid argument'' without a "
      "number" in out, out + err)

rc, out, err = run("explain", "217")
check("explain: a bare status", rc == 0
      and out.startswith("cuda/peer-access-unsupported-by-hardware\n"), out + err)
# The rules that need evidence (the own device, a VM, a host bridge...) are named as narrower
# causes, not printed in full under a line that cannot tell them apart.
narrower = out.split("Narrower causes the guard tells apart at run time", 1)
check("explain: the narrower causes are named after the answer",
      len(narrower) == 2 and "  cuda/peer-access-to-own-device: " in narrower[1]
      and "cuda/peer-access-to-own-device\n" not in out, out)
rc, out, err = run("explain", "--all", "217")
check("explain --all", rc == 0 and "Also possible" not in out and "Narrower causes" not in out
      and "cuda/peer-access-to-own-device\n" in out, out)

rc, out, err = run("explain", "-", stdin="[0] NCCL WARN Cuda failure 'peer access is not supported "
                   "between these two devices'\n")
check("explain: text from stdin", rc == 0 and out.startswith("nccl/"), out + err)

# A log of several errors, the way a user pastes it: every distinct error line in order, the
# first one named, repeats from other ranks counted, each rule printed once.
LOG = """\
[2024-05-01 10:00:01] INFO: starting training on 8 GPUs
node1:1234:1300 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node1:1234:1300 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is not supported between these two devices'
node1:1235:1301 [1] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is not supported between these two devices'

[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600051 milliseconds before timing out.
"""
rc, out, err = run("explain", "-", stdin=LOG)
order = [out.find(s) for s in ("line 3 (and 1 more like it): nccl/shm-cumem-host-peer-unsupported",
                               "line 6: nccl/unhandled-cuda-error",
                               "line 7: pytorch/nccl-watchdog-timeout")]
check("explain -: a log's error lines in order, repeats counted",
      rc == 0 and out.startswith("3 of 6 lines explained") and -1 not in order and order == sorted(order),
      out + err)
check("explain -: the first error is named",
      "First: line 3 (nccl/shm-cumem-host-peer-unsupported)" in out, out)
check("explain -: each rule once in full",
      out.count("\nnccl/shm-cumem-host-peer-unsupported\n") == 1
      and out.count("\nnccl/unhandled-cuda-error\n") == 1 and out.count("Root cause:") == 3, out)
rc, out, err = run("explain", "--json", "-", stdin=LOG)
try:
    doc = json.loads(out)
except ValueError:
    doc = {}
check("explain --json -: lines, their rules and the first",
      rc == 0 and [(l["line"], l["repeats"], l["matches"][0]) for l in doc.get("lines", [])] == [
          (3, 1, "nccl/shm-cumem-host-peer-unsupported"), (6, 0, "nccl/unhandled-cuda-error"),
          (7, 0, "pytorch/nccl-watchdog-timeout-first-collectives")]
      and doc.get("first") == 3 and doc["matches"][0]["id"] == "nccl/shm-cumem-host-peer-unsupported"
      and doc["lines"][1]["text"].startswith("[rank0]: torch.distributed"), out + err)


def top_ids(*args, stdin=None):
    rc, out, err = run("explain", "--json", *args, stdin=stdin)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = {"matches": [], "lines": [], "first": None, "error": out + err}
    return doc


# PyTorch prints NCCL's last warning under its own generic error: the line that names the cause
# comes after the one that names none, and is the answer.
LAST_ERROR = """\
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
ncclUnhandledCudaError: Call to CUDA function failed.
Last error:
Cuda failure 'peer access is not supported between these two devices'
"""
rc, out, err = run("explain", "-", stdin=LAST_ERROR)
check("explain -: a generic error followed by the line that names its cause",
      rc == 0 and "First: line 1 (nccl/unhandled-cuda-error), which names no cause. The first "
      "failure that names its cause is line 4 (nccl/cuda-failure-peer-access-unsupported): start "
      "there."
      in out and out.index("\nnccl/cuda-failure-peer-access-unsupported\n")
      < out.index("\nnccl/unhandled-cuda-error\n"), out + err)
doc = top_ids("-", stdin=LAST_ERROR)
check("explain --json -: the cause's rules first, the triage after",
      [m["id"] for m in doc["matches"]][:1] == ["nccl/cuda-failure-peer-access-unsupported"]
      and doc.get("first") == 1 and doc.get("cause") == 4
      and "nccl/unhandled-cuda-error" in [m["id"] for m in doc["matches"]], json.dumps(doc)[:600])
# A Python traceback: the frames above an exception say which call failed. A consumer opening a
# CUDA tensor another process shared (torch.multiprocessing) fails in rebuild_cuda_tensor.
IPC_TRACEBACK = """\
Traceback (most recent call last):
  File "/usr/lib/python3.10/multiprocessing/process.py", line 314, in _bootstrap
    self.run()
  File "/work/consumer.py", line 12, in worker
    t = q.get()
  File "/usr/lib/python3.10/multiprocessing/queues.py", line 122, in get
    return _ForkingPickler.loads(res)
  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/reductions.py", line 181, in rebuild_cuda_tensor
    storage = storage_cls._new_shared_cuda(
  File "/usr/local/lib/python3.10/dist-packages/torch/storage.py", line 1434, in _new_shared_cuda
    return torch.UntypedStorage._new_shared_cuda(*args, **kwargs)
RuntimeError: CUDA error: invalid argument
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
"""
alone = top_ids("RuntimeError: CUDA error: invalid argument")["matches"][0]["id"]
for name, paste in (("", IPC_TRACEBACK),
                    (", every line under torchrun's rank prefix",
                     "".join("[rank1]: " + l + "\n" for l in IPC_TRACEBACK.splitlines()))):
    doc = top_ids("-", stdin=paste)
    ids = [m["id"] for m in doc["matches"]]
    check("explain -: a traceback's frames name the call that failed" + name,
          alone == "cuda/invalid-argument-triage" and ids[:1] and ids[0].startswith("ipc/open-")
          and ids.index("cuda/invalid-argument-triage") > 0
          and [l["line"] for l in doc["lines"]] == [12], json.dumps(doc)[:600])
# Printed by PyTorch 2.11 on an H200 (driver 580) when a consumer rebuilt a CUDA tensor after its
# producer had exited (scripts/gpu-parts/explain-tracebacks.sh, docs/gpu-runs/2026-11-30-0631-*).
PRODUCER_GONE = 'Traceback (most recent call last):\n  File "/root/out/explain-tracebacks/cases.py", line 45, in <module>\n    {"producer-gone": case_producer_gone, "expandable": case_expandable}[sys.argv[1]]()\n  File "/root/out/explain-tracebacks/cases.py", line 22, in case_producer_gone\n    t = q.get(timeout=30)\n        ^^^^^^^^^^^^^^^^^\n  File "/usr/lib/python3.12/multiprocessing/queues.py", line 122, in get\n    return _ForkingPickler.loads(res)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/opt/torch/.venv/lib/python3.12/site-packages/torch/multiprocessing/reductions.py", line 180, in rebuild_cuda_tensor\n    storage = storage_cls._new_shared_cuda(\n              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/opt/torch/.venv/lib/python3.12/site-packages/torch/storage.py", line 1464, in _new_shared_cuda\n    return torch.UntypedStorage._new_shared_cuda(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\ntorch.AcceleratorError: CUDA error: invalid resource handle\nSearch for `cudaErrorInvalidResourceHandle\' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n'
doc = top_ids("-", stdin=PRODUCER_GONE)
check("explain -: a real traceback of a CUDA tensor opened after its producer exited",
      [m["id"] for m in doc["matches"]][:1] == ["ipc/open-after-exporter-exited"]
      and doc.get("cause") == 16, json.dumps(doc)[:600])
LATER = ("".join("INFO step %d done\n" % k for k in range(10))
         + "RuntimeError: CUDA error: invalid argument (a later step)\n")
doc = top_ids("-", stdin=IPC_TRACEBACK + LATER)
check("explain -: a traceback's frames stop after its exception's message",
      [l["matches"][0] for l in doc["lines"]][1:] == [alone], json.dumps(doc)[:600])
P2P_CHECK_TRACEBACK = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/custom_all_reduce.py", line 130, in __init__
    if not _can_p2p(rank, world_size):
  File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/custom_all_reduce_utils.py", line 238, in gpu_p2p_access_check
    result = pickle.loads(returned.stdout)
_pickle.UnpicklingError: invalid load key, 'W'.
"""
doc = top_ids("-", stdin=P2P_CHECK_TRACEBACK)
check("explain -: a rule whose context is a Python file only a frame names",
      [m["id"] for m in doc["matches"]] == ["vllm/p2p-check-output-not-a-pickle"]
      and top_ids("_pickle.UnpicklingError: invalid load key, 'W'.")["matches"] == [],
      json.dumps(doc)[:600])
doc = top_ids("-", stdin=IPC_TRACEBACK + "\nRuntimeError: CUDA error: invalid argument (from the next step)\n")
check("explain -: a traceback's frames stop at the blank line after its exception",
      [l["matches"][0] for l in doc["lines"]][1:] == [alone], json.dumps(doc)[:600])
# A log written with NCCL_DEBUG=INFO notes things on the way (GPU Direct RDMA disabled) before
# the failure: the failure is the answer, the notice after it, the triage last.
INFO_LOG = """\
node1:1234:1300 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node1:1234:1300 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
node1:1234:1300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
node1:1234:1300 [0] transport/p2p.cc:290 NCCL WARN Cuda failure 1 'invalid argument'
node1:1234:1300 [0] NCCL INFO transport/p2p.cc:427 -> 1
[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
"""
rc, out, err = run("explain", "-", stdin=INFO_LOG)
check("explain -: a notice before the failure",
      rc == 0 and "First: line 2 (nccl/gdr-disabled), a notice, not a failure. The first failure "
      "that names its cause is line 4 (nccl/p2p-peer-gpu-not-visible): start there." in out, out + err)
doc = top_ids("-", stdin=INFO_LOG)
ids = [m["id"] for m in doc["matches"]]
check("explain --json -: the failure's rules, then the notice's, then the triage's",
      ids[:1] == ["nccl/p2p-peer-gpu-not-visible"] and doc.get("cause") == 4
      and ids.index("nccl/gdr-disabled") < ids.index("nccl/unhandled-cuda-error"),
      json.dumps(doc)[:600])
# A log whose every line names no cause: the first is not called the start of what followed as
# if it named a cause; each triage is offered, the first line's first.
BARE_LOG = """\
RuntimeError: CUDA error: an illegal memory access was encountered
[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
"""
rc, out, err = run("explain", "-", stdin=BARE_LOG)
check("explain -: a log of lines that name no cause",
      rc == 0 and "First: line 1 (cuda/illegal-address-triage). No line names its cause: the "
      "triage answers below say how to find it, line 1's first" in out
      and out.index("\ncuda/illegal-address-triage\n") < out.index("\nnccl/unhandled-cuda-error\n"),
      out + err)
rc, out, err = run("explain", "--json", "217")
doc = json.loads(out) if rc == 0 else {}
check("explain --json: one line is one entry of lines",
      [l["line"] for l in doc.get("lines", [])] == [1] and doc.get("first") == 1
      and [m["id"] for m in doc["matches"]] == doc["lines"][0]["matches"], out + err)
# A long line is quoted in the list up to 160 bytes: never cut inside a character.
line = "[0] NCCL WARN Cuda failure 'peer access is not supported between these two devices' "
line = line + "x" * (159 - len(line)) + "\u00e9\u00e9\u00e9 on GPU n\u00b0 1"
p = subprocess.run([cli, "explain", "-"], input=(line + "\n" + line[:100] + "\n").encode(),
                   capture_output=True, env={k: v for k, v in os.environ.items()
                                             if k != "P2PGUARD_RULES"})
try:
    quoted = p.stdout.decode("utf-8")
except UnicodeDecodeError as e:
    quoted = "not UTF-8: %s" % e
check("explain -: a quoted line is cut between characters",
      p.returncode == 0 and (line[:159] + "...") in quoted, quoted[:600])

# What carried a paste to the user is taken off before it is read: the answer is the one the
# program's own line gets.
SHM_WARN = ("node1:1234:1300 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is "
            "not supported between these two devices'")
shm_rule = top_ids(SHM_WARN)["matches"][0]["id"]
NET_IB = "9[1a000] -> 2[6b000] [receive] via NET/IB/1"
doc = top_ids("-", stdin=NET_IB + "\n")
check("explain --json -: one line piped in, with its end of line",
      [m["id"] for m in doc["matches"]][:1] == ["nccl/gdr-disabled"], json.dumps(doc)[:400])
doc = top_ids("\x1b[1;31mtransport.cc:154 NCCL WARN Cuda failure 'invalid argument'\x1b[0m")
check("explain: a line with its terminal colours",
      [m["id"] for m in doc["matches"]][:1] == ["nccl/p2p-peer-gpu-not-visible"]
      and doc["lines"][0]["text"] == "transport.cc:154 NCCL WARN Cuda failure 'invalid argument'",
      json.dumps(doc)[:400])
CUDA_FAILURE = "Cuda failure 'peer access is not supported between these two devices'"
doc = top_ids(CUDA_FAILURE.replace("'", "&#39;"))
check("explain: a line copied from a web page's source (&#39;)",
      [m["id"] for m in doc["matches"]][:1] == [top_ids(CUDA_FAILURE)["matches"][0]["id"]]
      == ["nccl/cuda-failure-peer-access-unsupported"], json.dumps(doc)[:400])
doc = top_ids(SHM_WARN.replace("'peer", "\u2018peer").replace("devices'", "devices\u2019")
              .replace(" ", "\u00a0"))
check("explain: typographic quotes and no-break spaces",
      [m["id"] for m in doc["matches"]][:1] == [shm_rule], json.dumps(doc)[:400])
VLLM_CAR = ("Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer "
            "access is not supported between these two devices'")
doc = top_ids("`" + VLLM_CAR.replace("_", "\\_") + "`")
check("explain: a line a Markdown editor escaped, as inline code",
      [m["id"] for m in doc["matches"]][:1] == [top_ids(VLLM_CAR)["matches"][0]["id"]]
      == ["vllm/custom-all-reduce-peer-unsupported"], json.dumps(doc)[:400])
doc = top_ids("Error: RuntimeError('Cuda failure 217 \\'peer access is not supported between these"
              " two devices\\'\\nCuda failure')")
check("explain: a line quoted inside a Python string",
      [m["id"] for m in doc["matches"]][:1] == [top_ids(
          "Cuda failure 217 'peer access is not supported between these two devices'")[
          "matches"][0]["id"]],
      json.dumps(doc)[:400])
ACS = "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
DOCKER_LOG = "\n".join(json.dumps({"log": l + "\n", "stream": "stdout", "time": "2026-01-12T10:11:1%dZ" % k})
                       for k, l in enumerate(["Capabilities: [2a0 v1] Access Control Services", ACS]))
doc = top_ids("-", stdin=DOCKER_LOG + "\n")
check("explain -: a container runtime's JSON log, read as the program's lines",
      [(l["line"], l["text"], l["matches"][0]) for l in doc["lines"]]
      == [(2, ACS.rstrip(), "system/acs-request-redirect")], json.dumps(doc)[:600])


def wrap(text, width):
    lines = []
    for line in text.split("\n"):
        while len(line) > width:
            lines.append(line[:width])
            line = line[width:]
        lines.append(line)
    return "\n".join(lines)


rc, out, err = run("explain", "-", stdin=wrap(SHM_WARN, 80) + "\n")
check("explain -: one line cut by an 80-column terminal is one line",
      rc == 0 and out.startswith(shm_rule + "\n"), out + err)
plain, wrapped = top_ids("-", stdin=LOG), top_ids("-", stdin=wrap(LOG, 120))
check("explain --json -: a log cut at 120 columns, its lines numbered as pasted",
      [l["matches"][0] for l in wrapped["lines"]] == [l["matches"][0] for l in plain["lines"]]
      and [l["line"] for l in wrapped["lines"]] == [3, 8, 10] and wrapped["first"] == 3,
      json.dumps(wrapped)[:600])
rc, out, err = run("explain", "-", stdin=wrap(SHM_WARN, 97) + "\n")
check("explain -: one line cut in two by a terminal 97 columns wide is one line",
      rc == 0 and out.startswith(shm_rule + "\n"), out + err)
INFO = ("node1:1234:1300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read "
        "on every ring")
doc = top_ids("-", stdin=INFO + "\n" + SHM_WARN[:90] + "\n")
check("explain -: two lines, the second a record with its own header, stay two lines",
      [l["line"] for l in doc["lines"]] == [2] and doc["first"] == 2,
      json.dumps(doc)[:600])
RANKS = "".join("node1:%d:%d [%d] transport/shm.cc:590 NCCL WARN Cuda failure 217 peer access is "
                "not supported now\n" % (1234 + k, 1300 + k, k) for k in range(3)) + "summary line\n"
doc = top_ids("-", stdin=RANKS)
check("explain -: every rank's same warning, all one width, stays a line each",
      [(l["line"], l["repeats"]) for l in doc["lines"]] == [(1, 2)], json.dumps(doc)[:600])
UCX = ("1: [1580413046.362194] [cgpu05:56774:2]    cuda_ipc_md.c:102  UCX  ERROR cuIpcGetMemHandle"
       "(&(key->ph), (CUdeviceptr) addr) is failed. ret:invalid device context")
doc = top_ids("-", stdin="NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n" + UCX + "\nterminate called\n")
check("explain -: a log line as wide as a terminal (160) is not joined with the next",
      len(UCX) == 160 and [l["text"] for l in doc["lines"]][:1] == [UCX], json.dumps(doc)[:600])

rc, out, err = run("explain", "-", stdin="all good\nstill fine\n")
check("explain -: a log without errors is status 1", rc == 1 and "any of these 2 lines" in out,
      out + err)

rc, out, err = run("explain", "the weather is fine")
check("explain: nothing matched is status 1", rc == 1, out + err)
rc, out, err = run("explain", " ")
check("explain: empty text is a usage error", rc == 2, out + err)

sys.exit(1 if failures else 0)
