#!/bin/sh
# README.md's code blocks marked `<!-- example: PATH -->` must be the file PATH verbatim, so
# the examples a newcomer copies are the ones the build compiles and the tests run.
set -eu
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for path in $(sed -n 's/^<!-- example: \(.*\) -->$/\1/p' "$root/README.md"); do
    awk -v p="$path" '
        $0 == "<!-- example: " p " -->" { want = 1; next }
        want && /^```/ { if (inside) exit; inside = 1; next }
        inside { print }' "$root/README.md" >"$tmp/block"
    if ! diff -u "$root/$path" "$tmp/block"; then
        echo "README.md: the block marked $path differs from the file (diff above)"
        exit 1
    fi
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "README.md: no example blocks found"; exit 1; }
echo "README.md: $n example blocks match their files"
