#!/usr/bin/env bash
# Installs what building and testing p2pguard need, from Debian/Ubuntu packages, if missing.
# The CUDA toolkit's headers are expected at /usr/local/cuda (or -Dtoolkit_dir=...).
set -euo pipefail
packages=(meson ninja-build pkg-config gcc libsqlite3-dev sqlite3 libunwind-dev python3 binutils)
need=()
for pkg in "${packages[@]}"; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
	echo "installing: ${need[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ]; then
	echo "CUDA headers not found in ${CUDA_HOME:-/usr/local/cuda}/include: install the CUDA toolkit" >&2
	exit 1
fi
