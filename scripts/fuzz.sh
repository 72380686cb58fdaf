#!/usr/bin/env bash
# Fuzzes the guard's inputs with libFuzzer (clang, ASan and UBSan): the spool reader of `p2pguard
# recover` and a starting guard, the rules loader, the P2PGUARD_* settings, `explain`'s text, NCCL's
# calls into the guard's profiler plugin, and `merge` of a hostile input database.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s; targets: spool rules settings explain nccl merge)
# Builds in build-fuzz, starts each target from tests/fuzz/corpus (the shipped rules/ for rules),
# its regressions and what earlier runs kept in build-fuzz/corpus. A crash stops the run: the input
# is copied to tests/fuzz/regressions/TARGET/ (fix it, and commit it there: the 'fuzz' suite of the
# ordinary builds replays it from then on). Prints one line per target and exits non-zero on a
# crash. CI runs it for 15 s a target.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(spool rules settings explain nccl merge)

build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
		-Dbuildtype=debugoptimized >/dev/null
fi
# The whole tree, not only the fuzz targets: this is its clang build, and clang refuses some
# things GCC lets through (a jump past a cleanup variable's initialisation, an __atomic builtin on
# an _Atomic object).
ninja -C "$build" >/dev/null

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
printf '%-9s %8s %10s %8s %s\n' target seconds runs corpus result
for t in "${targets[@]}"; do
	work=$build/corpus/$t
	artifacts=$build/artifacts/$t
	mkdir -p "$work" "$artifacts"
	seeds=(tests/fuzz/regressions/$t)
	if [ "$t" = rules ]; then
		# libFuzzer reads one folder level: the shipped rules, flattened.
		find rules -name '*.json' -exec cp {} "$work"/ \;
	else
		seeds+=(tests/fuzz/corpus/$t)
	fi
	log=$build/fuzz-$t.log
	rc=0
	# -timeout: an input that takes 10 s is a hang, reported like a crash.
	"$build/tests/fuzz/fuzz-$t" "$work" "${seeds[@]}" -max_total_time="$seconds" -timeout=10 \
		-rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
		-artifact_prefix="$artifacts/" >"$log" 2>&1 || rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	corpus=$(find "$work" -type f | wc -l)
	if [ $rc -ne 0 ]; then
		status=1
		found=$(ls -t "$artifacts" | head -1 || true)
		if [ -n "$found" ]; then
			cp "$artifacts/$found" "tests/fuzz/regressions/$t/"
			result="CRASH: tests/fuzz/regressions/$t/$found ($log)"
		else
			result="FAILED (status $rc, $log)"
		fi
		grep -m3 -E 'ERROR|SUMMARY|runtime error' "$log" >&2 || tail -20 "$log" >&2
	else
		result=ok
	fi
	printf '%-9s %8s %10s %8s %s\n' "$t" "$seconds" "${runs:-?}" "$corpus" "$result"
done
exit $status
