#!/usr/bin/env bash
# test_layers_circles: compiles the fixture tree tests/layers/circles into objects and checks
# what check_layers.sh says about the circles between its files.
# Usage: check_circles.sh C_COMPILER
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cc=$1
tree=$here/circles
objs=$(mktemp -d)
trap 'rm -rf "$objs"' EXIT
mkdir -p "$objs/src/support"
for f in a b k g c d e f; do # u.c stays unbuilt
    "$cc" -c "$tree/src/support/$f.c" -o "$objs/src/support/$f.c.o" || exit 1
done
out=$(bash "$here/check_layers.sh" "$tree" "$objs" 2>&1)
rc=$?
echo "$out"
fail=0
expect() {
    if ! grep -qxF -- "$1" <<<"$out"; then
        echo "check_circles: missing the line: $1"
        fail=1
    fi
}
[ $rc -eq 1 ] || { echo "check_circles: exit status $rc, expected 1"; fail=1; }
expect "circle of 3 files (not a circle src/ARCHITECTURE.md declares): src/support/a.c src/support/b.c src/support/k.c"
expect "  src/support/a.c takes b_fn of src/support/b.c"
expect "  src/support/b.c takes k_fn of src/support/k.c"
expect "  src/support/k.c takes a_fn of src/support/a.c"
expect "declared circle allowed: 2 files"
expect "declared circle stale is no longer one circle of this build (its files do not all reach each other by the symbols they take): update src/ARCHITECTURE.md"
expect "declared circle typo names src/support/nope.c, which is not a file of the tree"
n=$(grep -c '^circle of' <<<"$out")
[ "$n" -eq 1 ] || { echo "check_circles: $n undeclared circles reported, expected 1"; fail=1; }
if grep -q 'g\.c\|unbuilt' <<<"$out"; then
    echo "check_circles: g.c (called, calls nothing) or the unbuilt circle was reported"
    fail=1
fi
[ $fail -eq 0 ] && echo "check_circles: the checker reports what it should"
exit $fail
