#!/usr/bin/env bash
# The guard's cost per async peer copy across processes, interleaved: bare, default (sampled) and a
# third variant (CENV, default P2PGUARD_GPU_TIMING=cupti), REPS times each (default 9), each process
# `rt_peer bench 20000 256` pinned to cores 2-5. On the GPU machine, from the repository root with
# .carry/ beside it (scripts/prepare-carry.sh): `REPS=11 bash scripts/overhead-ab.sh`.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$PWD/.carry/lib:$LD_LIBRARY_PATH
L=$PWD/.carry/build/src/preload/libp2pguard.so
P=$PWD/.carry/build/tests/programs/rt_peer
b() { taskset -c 2-5 "$@" 2>/dev/null | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p'; }
for i in $(seq 1 ${REPS:-9}); do
	B+="$(b $P bench 20000 256) "
	S+="$(P2PGUARD_DB=/tmp/s.db P2PGUARD_QUIET=1 LD_PRELOAD=$L b $P bench 20000 256) "
	C+="$(env P2PGUARD_DB=/tmp/c.db P2PGUARD_QUIET=1 ${CENV:-P2PGUARD_GPU_TIMING=cupti} LD_PRELOAD=$L taskset -c 2-5 $P bench 20000 256 2>/dev/null | sed -n "s/.*ns_per_call=\([0-9.]*\).*/\1/p") "
done
echo "bare: $B"; echo "sampled: $S"; echo "cupti: $C"
python3 - "$B" "$S" "$C" <<'PY'
import sys, statistics as st, sqlite3
b, s, c = ([float(x) for x in a.split()] for a in sys.argv[1:])
print("median bare %.0f sampled %.0f (%+.0f) cupti %.0f (%+.0f)" % (st.median(b), st.median(s), st.median(s) - st.median(b), st.median(c), st.median(c) - st.median(b)))
print("paired median: sampled %+.0f cupti %+.0f" % (st.median([y - x for x, y in zip(b, s)]), st.median([y - x for x, y in zip(b, c)])))
con = sqlite3.connect("/tmp/c.db"); print("cupti rows, timed:", con.execute("select count(*), count(gpu_ns) from transfers").fetchone())
PY
