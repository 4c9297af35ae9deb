#!/bin/sh
# Installs the build into a temporary prefix and builds tests/install/consumer.c against it,
# once through pkg-config and once through CMake's find_package(tgc).
set -eu
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -n 1)
export PKG_CONFIG_PATH="$libdir"
cc -std=c11 -Wall -Wextra -Werror "$src/consumer.c" -o "$tmp/pc_consumer" \
   $(pkg-config --cflags --libs tgc) -Wl,-rpath,"$(dirname "$libdir")"
"$tmp/pc_consumer"
mkdir "$tmp/cmake_consumer"
cat >"$tmp/cmake_consumer/CMakeLists.txt" <<CMK
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(tgc REQUIRED)
add_executable(consumer $src/consumer.c)
target_link_libraries(consumer tgc::tgc)
CMK
cmake -S "$tmp/cmake_consumer" -B "$tmp/cmake_consumer/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cmake_consumer/b" >/dev/null
"$tmp/cmake_consumer/b/consumer"
