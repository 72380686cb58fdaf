#!/usr/bin/env bash
# Copies what scripts/gpu-check.sh needs into .carry/ (ignored by git; named in the device run's
# carry list): the build's binaries, libunwind.so.8, which the GPU machine does not have, and
# libjansson.so.4, which a bare Ubuntu image may lack.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf .carry
mkdir -p .carry/lib .carry/build
cp -L /usr/lib/x86_64-linux-gnu/libunwind.so.8 /usr/lib/x86_64-linux-gnu/libjansson.so.4 .carry/lib/
cd "$build"
find src/preload/libp2pguard.so src/preload/libp2pguard-core.so src/cli/p2pguard tests/programs tests/conformance tests/bench tests/nccl \
	-maxdepth 1 -type f -perm -u+x ! -name '*.p' -print0 | xargs -0 cp --parents -t ../.carry/build
cd ..
du -sh .carry
