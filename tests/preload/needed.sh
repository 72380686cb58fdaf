#!/bin/sh
# libp2pguard.so links the C library only (the sanitizer runtimes in an instrumented build): every
# process that inherits LD_PRELOAD loads it, and loading a library costs each of them time.
set -eu
lib=$1
extra=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
	grep -v -e '^libc\.so\.6$' -e '^ld-linux' -e '^lib[atu]b\?san\.so' || true)
if [ -z "$extra" ]; then
	echo "ok - $(basename "$lib") needs the C library only"
else
	echo "not ok - $(basename "$lib") needs more than the C library: $extra"
	exit 1
fi
