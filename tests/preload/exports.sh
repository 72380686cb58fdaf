#!/bin/sh
# A library exports exactly the expected set: libp2pguard.so the interposed symbols (CUDA entry
# points and dlsym), libp2pguard-core.so what the preload calls (src/preload/core.map).
set -eu
lib=$1
expected=$2
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
if [ "$actual" = "$(sort "$expected")" ]; then
	echo "ok - exported symbols are exactly the interposed set ($(echo "$actual" | wc -l))"
else
	echo "not ok - exported symbols differ from $expected:"
	echo "$actual" | diff "$expected" - || true
	exit 1
fi
