# SPDX-License-Identifier: MIT
"""The facts of a failure, as JSON, parse and carry each key with its type.
Usage: check_json.py path/to/test-evidence"""
import json
import subprocess
import sys

out = subprocess.run([sys.argv[1], "--json"], check=True, capture_output=True, text=True).stdout
facts = json.loads(out)
types = {
    "api": str, "status": int, "device": int, "peer_device": int, "peer_is_self": bool,
    "device_count": int, "ordinal_valid": bool, "device_name": str, "peer_name": str,
    "device_pci": str, "peer_pci": str, "can_access_peer": int, "p2p_access_supported": int,
    "p2p_native_atomic": int, "p2p_performance_rank": int, "nvml": str, "iommu_cmdline": str,
    "peers_enabled": int, "flags": int, "driver_version": int, "driver": str,
    "nccl_p2p_disable": str,
}
bad = [k for k, t in types.items() if not isinstance(facts.get(k), t) or
       (t is int and isinstance(facts.get(k), bool))]
print(json.dumps(facts, indent=1, sort_keys=True))
if bad:
    print("missing or mistyped:", ", ".join(bad))
    sys.exit(1)
if facts["api"] != "cudaDeviceEnablePeerAccess" or facts["status"] != 217:
    sys.exit(1)
print("ok - JSON parses, %d facts with their types" % len(facts))
