#!/usr/bin/env bash
# Where a process's start goes under a preload: the dynamic loader's own time (LD_DEBUG=statistics:
# cycles in the loader, in loading objects, in relocation; median of N runs of /bin/true) bare,
# with an empty preload and with the guard; then /bin/true's cost bare vs preloaded with the same
# two libraries copied to /dev/shm, beside the copies where the build lies (a slow file system
# under the build shows up as the difference between the two). Prints markdown tables.
#   scripts/loader-time.sh [BUILD_DIR]     (BUILD=... also works; N=21, ROUNDS=7, RUNS=200)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${BUILD:-${1:-build}}")
n=${N:-21}
guard=$build/src/preload/libp2pguard.so
empty=$build/tests/bench/libp2pg-empty-preload.so
spawn=$build/tests/bench/bench_spawn
echo "file systems: build $(df -T "$build" | awk 'NR==2 {print $2}'), /dev/shm $(df -T /dev/shm | awk 'NR==2 {print $2}')"
echo
stat_of() { # LIB WHAT: the median of n runs of LD_DEBUG=statistics' line WHAT, in cycles
	local lib=$1 what=$2
	for _ in $(seq "$n"); do
		if [ "$lib" = none ]; then LD_DEBUG=statistics /bin/true 2>&1; else
			LD_DEBUG=statistics LD_PRELOAD=$lib /bin/true 2>&1; fi |
			grep -m1 "$what" | sed 's/.*: *\([0-9]*\) cycles.*/\1/'
	done | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}
echo "| /bin/true | loader total, cycles | loading objects | relocation |"
echo "|---|---|---|---|"
for lib in none "$empty" "$guard"; do
	name=$([ "$lib" = none ] && echo bare || basename "$lib")
	echo "| $name | $(stat_of "$lib" "total startup time") | $(stat_of "$lib" "time needed to load objects") | $(stat_of "$lib" "time needed for relocation") |"
done
shm=$(mktemp -d /dev/shm/p2pg-idle.XXXXXX)
trap 'rm -rf "$shm"' EXIT
cp "$guard" "$build/src/preload/libp2pguard-core.so" "$empty" "$shm/"
echo
echo "| command | processes | bare us | preloaded us | difference us (median of rounds) | difference % | page faults a process, bare / preloaded |"
echo "|---|---|---|---|---|---|---|"
for lib in "$empty" "$guard" "$shm/$(basename "$empty")" "$shm/$(basename "$guard")"; do
	"$spawn" --rounds "${ROUNDS:-7}" --runs "${RUNS:-200}" --env P2PGUARD_QUIET=1 "$lib" -- /bin/true |
		tail -1 | sed "s#^| [^|]*|#| \`/bin/true\` under ${lib#$build/} |#"
done
