#!/usr/bin/env bash
# The guard's cost per async peer copy across processes: variants interleaved, REPS runs each (default
# 9), each run a process doing `rt_peer bench CALLS 256` (default 20000 calls; a run's figure is the
# median of its batches of 256) pinned to CORES (default 2-5). On the GPU machine, from the repository
# root with .carry/ beside it (scripts/prepare-carry.sh):
#   REPS=11 bash scripts/overhead-ab.sh
#   VARIANTS="bare;sampled;summary:P2PGUARD_RECORD=summary" CORES=8,9 bash scripts/overhead-ab.sh
# VARIANTS is ';'-separated NAME[:VAR=VALUE ...]; "bare" runs without the guard. Each guarded variant
# writes its own database ($DIR/NAME.db, default DIR a fresh temporary folder); a variant that sets
# P2PGUARD_DB=nodb gets a path that cannot be opened as a database (a folder), so its drainer
# stops at once and the records stay in the spool: the hot path without the drainer's work.
# Prints each run, then per variant the median and two estimates of the difference to bare: the
# difference of the medians and the Hodges-Lehmann estimate (median of all differences
# variant run - bare run), with the spread of the latter (its 25th and 75th percentiles).
# Then the same per speed: on the H200 VM a process runs the whole of its life at one of two
# speeds (bare ~1.6 or ~2.5 us per call; not its CPU's doing: scripts/core-map.sh), which swings
# medians of a few runs by a microsecond. A variant's runs are split at their largest jump if it
# exceeds 20% (one speed otherwise, listed as the fast one: with 9 or more runs all of them slow is
# unlikely, and the runs are printed), and each speed is compared with bare's runs at that speed.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/.carry/build}
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
L=$BUILD/src/preload/libp2pguard.so
P=$BUILD/tests/programs/rt_peer
VARIANTS=${VARIANTS:-"bare;sampled;cupti:P2PGUARD_GPU_TIMING=cupti"}
CORES=${CORES:-2-5}
CALLS=${CALLS:-20000}
DIR=${DIR:-$(mktemp -d /tmp/overhead-ab.XXXXXX)}
mkdir -p "$DIR/nodb"
IFS=';' read -ra V <<<"$VARIANTS"
declare -A R=()
run() {
	local name=$1 envs=$2
	if [ "$name" = bare ]; then
		taskset -c "$CORES" "$P" bench "$CALLS" 256 2>/dev/null
	else
		envs=${envs//P2PGUARD_DB=nodb/P2PGUARD_DB=$DIR/nodb}
		# shellcheck disable=SC2086
		env P2PGUARD_DB="$DIR/$name.db" P2PGUARD_QUIET=1 $envs LD_PRELOAD="$L" \
			taskset -c "$CORES" "$P" bench "$CALLS" 256 2>/dev/null
	fi | grep BENCH | tail -1
}
for i in $(seq 1 "${REPS:-9}"); do
	for v in "${V[@]}"; do
		name=${v%%:*}
		envs=""
		[[ $v == *:* ]] && envs=${v#*:}
		line=$(run "$name" "$envs")
		echo "$name ${line:-(no result)}" >>"$DIR/runs.txt"
		R[$name]+="$(echo "$line" | sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p') "
	done
done
echo "every run's line: $DIR/runs.txt"
args=()
for v in "${V[@]}"; do
	name=${v%%:*}
	echo "$name: ${R[$name]}"
	args+=("$name" "${R[$name]}")
done
python3 - "$DIR" "${args[@]}" <<'PY'
import os, sqlite3, statistics as st, sys
d, rest = sys.argv[1], sys.argv[2:]
runs = {rest[i]: [float(x) for x in rest[i + 1].split()] for i in range(0, len(rest), 2)}
bare = runs.get("bare")
def q(xs, f):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(f * len(xs)))]
print("| variant | median ns/call | vs bare, medians | vs bare, Hodges-Lehmann [25%, 75%] | rows, with gpu_ns, dropped |")
print("|---|---|---|---|---|")
for name, xs in runs.items():
    if not xs:
        print(f"| {name} | no result | | | |")
        continue
    m = st.median(xs)
    cells = [name, "%.0f" % m, "", "", ""]
    if bare and name != "bare":
        diffs = [y - x for y in xs for x in bare]
        cells[2] = "%+.0f ns" % (m - st.median(bare))
        cells[3] = "%+.0f ns [%+.0f, %+.0f]" % (st.median(diffs), q(diffs, 0.25), q(diffs, 0.75))
    path = os.path.join(d, name + ".db")
    if name != "bare" and os.path.isfile(path):
        try:
            c = sqlite3.connect(path)
            n, t = c.execute("select count(*), count(gpu_ns) from transfers").fetchone()
            dr = c.execute("select coalesce(sum(records_dropped), 0) from processes").fetchone()[0]
            cells[4] = f"{n}, {t}, {dr}"
        except sqlite3.Error as e:
            cells[4] = str(e)
    print("| " + " | ".join(cells) + " |")

def speeds(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs, []
    i = max(range(len(xs) - 1), key=lambda k: xs[k + 1] / xs[k])
    if xs[i + 1] / xs[i] > 1.2:
        return xs[: i + 1], xs[i + 1 :]
    return xs, []

if bare:
    bf, bs = speeds(bare)
    print()
    print("| variant | fast: runs, median, vs bare | slow: runs, median, vs bare |")
    print("|---|---|---|")
    for name, xs in runs.items():
        f, s = speeds(xs)
        cell = lambda a, b: ("%d, %.0f, %+.0f ns" % (len(a), st.median(a), st.median(a) - st.median(b))) if a and b else ("%d" % len(a))
        print(f"| {name} | {cell(f, bf)} | {cell(s, bs)} |")
PY
