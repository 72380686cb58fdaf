#!/usr/bin/env bash
# One pass over the one-GPU proofs of this release, on the GPU machine, in one device call:
# every scripts/gpu-parts/*.sh (or the parts named as arguments), each under its own time limit,
# then the idle-cost benchmark against the real driver. Prepare here with scripts/prepare-carry.sh
# (it carries the build and the libraries the GPU machine lacks), then on the GPU machine:
#   bash scripts/gpu-round.sh [PART...]
# Each part's stdout goes to $RESULTS/<part>.md and is echoed; raw files land in $RESULTS/<part>/.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BUILD=${BUILD:-$PWD/.carry/build}
RESULTS=${OUT:-$(mktemp -d /tmp/gpu-round.XXXXXX)}
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
limit=${PART_LIMIT_S:-240}
mkdir -p "$RESULTS"

{
	date -u +"%Y-%m-%d %H:%M UTC"
	nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version --format=csv 2>&1
	python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "nccl", torch.cuda.nccl.version())' 2>&1
	nproc
} | tee "$RESULTS/machine.txt"

parts=("$@")
if [ ${#parts[@]} -eq 0 ]; then
	for f in scripts/gpu-parts/*.sh; do parts+=("$(basename "$f" .sh)"); done
fi
for part in "${parts[@]}"; do
	echo "## $part"
	mkdir -p "$RESULTS/$part"
	t0=$EPOCHREALTIME
	RESULTS=$RESULTS/$part timeout -k 10 "$limit" bash "scripts/gpu-parts/$part.sh" \
		>"$RESULTS/$part.md" 2>"$RESULTS/$part/stderr.txt"
	rc=$?
	cat "$RESULTS/$part.md"
	[ $rc -eq 0 ] || { echo "($part exited $rc; last stderr lines:)"; tail -5 "$RESULTS/$part/stderr.txt"; }
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "(%s: %.0f s)\n", "'"$part"'", b - a}'
done
