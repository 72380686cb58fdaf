#!/bin/sh
# Every C file of the tree is formatted with the repository's .clang-format.
cd "$1" || exit 2
command -v clang-format >/dev/null 2>&1 || { echo "clang-format not installed: skipped"; exit 77; }
bad=0
for f in $(git ls-files '*.c' '*.h' 2>/dev/null || find src include tests -name '*.[ch]'); do
	if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
		echo "not formatted: $f (run clang-format -i $f)"
		bad=1
	fi
done
[ $bad = 0 ] && echo "ok - every C file is formatted"
exit $bad
