#!/usr/bin/env bash
# The installed package, used as a user would: `cmake --install` into a temporary prefix, then examples/embed
# built against that prefix (find_package, not the build tree) and run; the C example again through pkg-config;
# and the .deb that cpack makes, checked for the same files.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(cd "$prefix" && dirname "$(find . -name libratekeeper.a | head -1)")
for f in include/ratekeeper/limiter.h include/ratekeeper/ratekeeper.h "$libdir/libratekeeper.a" \
         "$libdir/libratekeeper.so" "$libdir/cmake/ratekeeper/ratekeeperConfig.cmake" \
         "$libdir/pkgconfig/ratekeeper.pc" bin/ratekeeper; do
  [ -e "$prefix/$f" ] || fail "cmake --install did not put $f in place"
done

# CMake: find_package(ratekeeper CONFIG) from the prefix only.
cmake -S "$src/examples/embed" -B "$tmp/embed" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >/dev/null
grep -q "ratekeeper_DIR:PATH=$prefix/" "$tmp/embed/CMakeCache.txt" || fail "the example did not find the installed package"
cmake --build "$tmp/embed" >/dev/null
out=$("$tmp/embed/embed")
echo "embed: $out"
[[ $out == "first refused: request 11, estimate 0.515/s, retry after "* ]] || fail "embed printed: $out"

expected_c="request 1: allowed, remaining 2, retry after 0.000 s
request 2: allowed, remaining 1, retry after 0.000 s
request 3: allowed, remaining 0, retry after 0.000 s
request 4: refused, remaining 0, retry after 1.000 s
request 5: refused, remaining 0, retry after 1.000 s
a limit of -1: limit: "
out=$("$tmp/embed/embed_c")
echo "embed_c: $out"
[[ $out == "$expected_c"* ]] || fail "embed_c printed: $out"

# pkg-config, with a strict C compiler: the header is C99.
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Wpedantic -Werror "$src/examples/embed/embed.c" -o "$tmp/embed_pc" \
   $(pkg-config --cflags --libs ratekeeper)
out=$(LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/embed_pc")
[[ $out == "$expected_c"* ]] || fail "embed.c through pkg-config printed: $out"
[ "$(pkg-config --modversion ratekeeper)" = "$(sed -n 's/^project(ratekeeper VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" ] \
  || fail "pkg-config --modversion: $(pkg-config --modversion ratekeeper)"

# The .deb.
(cd "$build" && cpack -G DEB -B "$tmp/deb" >/dev/null)
deb=$(ls "$tmp"/deb/ratekeeper_*.deb)
contents=$(dpkg-deb -c "$deb")
for f in ./usr/include/ratekeeper/ratekeeper.h libratekeeper.a libratekeeper.so ratekeeperConfig.cmake \
         pkgconfig/ratekeeper.pc ./usr/bin/ratekeeper; do
  grep -q -- "$f" <<<"$contents" || fail "the .deb has no $f"
done
if [ -e "$build/nginx/ngx_http_ratekeeper_module.so" ]; then
  grep -q ./usr/lib/nginx/modules/ngx_http_ratekeeper_module.so <<<"$contents" || fail "the .deb has no nginx module"
fi
dpkg-deb -f "$deb" Depends | grep -q libstdc++ || fail "the .deb does not depend on libstdc++: $(dpkg-deb -f "$deb" Depends)"
echo "package: install, find_package, pkg-config and .deb all work"
