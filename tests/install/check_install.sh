#!/bin/sh
# Installs the build into a temporary prefix and builds programs against it as a user would:
# tests/install/consumer.c through pkg-config and CMake's find_package(tgc) (tgc::tgc); the
# example of README.md ("## Example", its first C block) through pkg-config as README says,
# then statically through CMake's tgc::tgc_static and through `pkg-config --static` with
# only libtgc.a installed. Each program runs; the static ones must not need libtgc.so.
set -eu
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "check_install: $*" >&2
    exit 1
}
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -n 1)
libdir=$(dirname "$libdir")
export PKG_CONFIG_PATH="$libdir/pkgconfig"

awk '/^## Example/ { in_sec = 1; next }
     /^## / { in_sec = 0 }
     in_sec && !done && /^```c$/ { in_code = 1; next }
     in_code && /^```$/ { in_code = 0; done = 1 }
     in_code { print }' "$src/../../README.md" >"$tmp/readme_example.c"
grep -q 'int main' "$tmp/readme_example.c" || fail "no C example under '## Example' in README.md"

# the shared library: a SONAME with the ABI version, and the links to it
soname=$(readelf -d "$libdir/libtgc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case $soname in
libtgc.so.[0-9]*) ;;
*) fail "libtgc.so has no versioned SONAME (got '$soname')" ;;
esac
[ -e "$libdir/$soname" ] || fail "$soname is not installed"

# Libs.private holds linker flags only (no bare names, no paths of libraries)
for f in $(pkg-config --libs-only-other --libs-only-l --static tgc); do
    case $f in
    -*) ;;
    *) fail "pkg-config --static --libs tgc gives '$f', not a linker flag" ;;
    esac
done

cflags="-std=c11 -Wall -Wextra -Werror"
for prog in consumer readme_example; do
    file=$src/consumer.c
    [ $prog = consumer ] || file=$tmp/readme_example.c
    # shellcheck disable=SC2046,SC2086
    cc $cflags "$file" -o "$tmp/pc_$prog" $(pkg-config --cflags --libs tgc) -Wl,-rpath,"$libdir"
    "$tmp/pc_$prog" || fail "$prog (pkg-config, shared) failed"
done

mkdir "$tmp/cmake_consumer"
cat >"$tmp/cmake_consumer/CMakeLists.txt" <<CMK
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(tgc REQUIRED)
add_executable(consumer $src/consumer.c)
target_link_libraries(consumer tgc::tgc)
add_executable(readme_example_static $tmp/readme_example.c)
target_link_libraries(readme_example_static tgc::tgc_static)
CMK
cmake -S "$tmp/cmake_consumer" -B "$tmp/cmake_consumer/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cmake_consumer/b" >/dev/null
"$tmp/cmake_consumer/b/consumer" || fail "consumer (CMake, tgc::tgc) failed"
exe=$tmp/cmake_consumer/b/readme_example_static
if readelf -d "$exe" | grep -q 'NEEDED.*libtgc'; then
    fail "readme_example_static (tgc::tgc_static) needs libtgc.so"
fi
"$exe" || fail "readme_example_static (CMake, tgc::tgc_static) failed"

# pkg-config --static with the archive alone: -ltgc can only be libtgc.a
rm -f "$libdir"/libtgc.so*
# shellcheck disable=SC2046,SC2086
cc $cflags "$tmp/readme_example.c" -o "$tmp/pcs_readme_example" \
   $(pkg-config --static --cflags --libs tgc)
if readelf -d "$tmp/pcs_readme_example" | grep -q 'NEEDED.*libtgc'; then
    fail "readme_example (pkg-config --static) needs libtgc.so"
fi
"$tmp/pcs_readme_example" || fail "readme_example (pkg-config --static) failed"
# a static program that calls only the device API still has the build's backends registered
cat >"$tmp/devices.c" <<'PROBE'
#include <stdio.h>
#include <string.h>
#include <tgc/tgc.h>
int main(void)
{
    if (tgc_cuda_check() == TGC_OK || !strstr(tgc_last_error(), "registered"))
        return 0;
    fprintf(stderr, "%s\n", tgc_last_error());
    return 1;
}
PROBE
# shellcheck disable=SC2046,SC2086
cc $cflags "$tmp/devices.c" -o "$tmp/pcs_devices" $(pkg-config --static --cflags --libs tgc)
"$tmp/pcs_devices" || fail "a static program calling only tgc_cuda_check has no backends registered"
echo "check_install: shared and static, pkg-config and CMake: ok"
