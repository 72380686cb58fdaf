#!/usr/bin/env bash
# Installs what building and testing p2pguard need, from Debian/Ubuntu packages, if missing:
# gcc and g++ (with libasan, libubsan and libtsan), meson/ninja, SQLite, jansson and libunwind headers, sqlite3 and
# python3 (with its sqlite3 module, and its headers for a test extension module) to read the
# databases the tests write, binutils (readelf, nm); for the outputs' tests: python3-jsonschema (the trace-event schema), prometheus (promtool) and
# python3-prometheus-client (the exposition's parsers), chromium, chromium-driver and
# python3-selenium (the HTML report in a real headless browser), npm (to fetch speedscope, pinned, the
# trace's second importer: tests/preload/test_trace_view.py) and, from npm, speedscope itself into
# tests/.node (git-ignored).
# The CUDA toolkit's headers are expected at /usr/local/cuda (or meson -Dtoolkit_dir=...).
set -euo pipefail
need=()
for pkg in meson ninja-build pkg-config gcc g++ libsqlite3-dev sqlite3 libjansson-dev libunwind-dev python3 python3-dev binutils \
	python3-jsonschema prometheus python3-prometheus-client chromium chromium-driver python3-selenium clang clang-format; do
	[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" = "install ok installed" ] || need+=("$pkg")
done
# npm by the command, not the package: a Node.js from elsewhere (NodeSource's nodejs) brings its own
# npm and conflicts with Debian's.
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
	echo "installing: ${need[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# libFuzzer's runtime ships apart from clang on Debian (libclang-rt-N-dev, N: clang's major version).
fuzzer_rt() { [ -f "$(clang --print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer-x86_64.a" ] ||
	ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-"$(uname -m)".a >/dev/null 2>&1; }
if ! fuzzer_rt; then
	major=$(clang -dumpversion | cut -d. -f1)
	if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
	echo "installing: libclang-rt-$major-dev"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
		"libclang-rt-$major-dev" >/dev/null
fi
# speedscope: an offline viewer whose release build (static HTML + JS) imports Chrome trace-event
# JSON; the test opens `p2pguard trace` output in it. Pinned: the test reads its DOM.
speedscope=1.25.0
root=$(cd "$(dirname "$0")/.." && pwd)
if ! grep -qs "\"version\": \"$speedscope\"" "$root/tests/.node/node_modules/speedscope/package.json"; then
	echo "installing: speedscope@$speedscope (npm, into tests/.node)"
	npm install --prefix "$root/tests/.node" --no-audit --no-fund --loglevel=error "speedscope@$speedscope" >/dev/null
fi
if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ]; then
	echo "CUDA headers not found in ${CUDA_HOME:-/usr/local/cuda}/include: install the CUDA toolkit" >&2
	exit 1
fi
