#!/usr/bin/env bash
# The installed package, used as a user would: `cmake --install` into a temporary prefix, then examples/embed
# built against that prefix (find_package, not the build tree) and run; the C example again through pkg-config;
# and the .deb that cpack makes, checked for the same files. The blocks of README.md and docs/embedding.md marked
# `<!-- docs-test: by tests/package/install_test.sh -->` are taken from the docs and run here: the install command,
# the CMake lines (a project built with them) and the pkg-config command (its program run without LD_LIBRARY_PATH).
# No installed artefact may keep a RUNPATH into the build tree.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }

# The fenced blocks of a doc that follow a `by tests/package/install_test.sh` marker, each as its language on one
# line and its text, NUL-terminated.
doc_blocks() {
  awk '/^<!-- docs-test: by tests\/package\/install_test.sh -->$/ { mark = 1; next }
       mark && !inside && /^```/ { inside = 1; print substr($0, 4); next }
       inside && /^```/ { inside = 0; mark = 0; printf "%c", 0; next }
       inside { print; next }
       { mark = 0 }' "$1"
}
doc_block() {  # DOC LANG N: the Nth such block of that language (from 1)
  local n=0 b
  while IFS= read -r -d '' b; do
    [ "${b%%$'\n'*}" = "$2" ] || continue
    n=$((n + 1))
    [ "$n" = "$3" ] && { printf '%s\n' "${b#*$'\n'}"; return; }
  done < <(doc_blocks "$1")
  fail "$1 has no ${3}th \`\`\`$2 block marked for this test"
}

# docs/embedding.md's install command, into the temporary prefix (its build line is what CI runs before the tests).
install_cmd=$(doc_block "$src/docs/embedding.md" sh 1 | grep '^cmake --install ')
[ -n "$install_cmd" ] || fail "docs/embedding.md's first sh block has no cmake --install line"
install_cmd=${install_cmd//build\/dev/$build}
install_cmd=${install_cmd//\/opt\/ratekeeper/$prefix}
echo "$install_cmd"
eval "$install_cmd" >/dev/null
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

# pkg-config, with a strict C compiler: the header is C99. The program runs without LD_LIBRARY_PATH: the .pc puts
# the library's directory in its RUNPATH.
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
unset LD_LIBRARY_PATH
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Wpedantic -Werror "$src/examples/embed/embed.c" -o "$tmp/embed_pc" \
   $(pkg-config --cflags --libs ratekeeper)
out=$("$tmp/embed_pc")
[[ $out == "$expected_c"* ]] || fail "embed.c through pkg-config printed: $out"
[ "$(pkg-config --modversion ratekeeper)" = "$(sed -n 's/^project(ratekeeper VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" ] \
  || fail "pkg-config --modversion: $(pkg-config --modversion ratekeeper)"

# docs/embedding.md's pkg-config command, as written, on the C example (as app.c).
mkdir "$tmp/pc" && cp "$src/examples/embed/embed.c" "$tmp/pc/app.c"
pc_cmd=$(doc_block "$src/docs/embedding.md" sh 2)
(cd "$tmp/pc" && eval "$pc_cmd") || fail "docs/embedding.md: $pc_cmd failed"
out=$("$tmp/pc/a.out")
[[ $out == "$expected_c"* ]] || fail "docs/embedding.md's pkg-config program printed: $out"

# The CMake lines of README.md and docs/embedding.md, each in a project of one program (the C++ example, as app).
for doc in README.md docs/embedding.md; do
  for kind in static shared; do
    d="$tmp/cmake-$(basename "$doc" .md)-$kind"
    mkdir "$d" && cp "$src/examples/embed/main.cc" "$d/app.cc"
    lines=$(doc_block "$src/$doc" cmake 1)
    [ "$kind" = static ] || lines=${lines//ratekeeper::ratekeeper)/ratekeeper::shared)}
    printf 'cmake_minimum_required(VERSION 3.16)\nproject(app CXX)\nset(CMAKE_CXX_STANDARD 20)\n'`
          `'add_executable(app app.cc)\n%s\n' "$lines" >"$d/CMakeLists.txt"
    cmake -S "$d" -B "$d/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      >/dev/null || fail "$doc's CMake lines ($kind): configure failed"
    cmake --build "$d/build" >/dev/null || fail "$doc's CMake lines ($kind): build failed"
    out=$("$d/build/app")
    [[ $out == "first refused: request 11, "* ]] || fail "$doc's CMake lines ($kind): the program printed $out"
  done
done

# RUNPATHs: nothing installed points into the build tree; the nginx module finds the installed library.
runpath() { readelf -d "$1" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p'; }
check_runpaths() {  # ROOT: every ELF file under it
  local f
  while IFS= read -r f; do
    if [[ "$(runpath "$f")" == *"$build"* ]]; then fail "$f keeps a RUNPATH into the build tree: $(runpath "$f")"; fi
  done < <(find "$1" -type f \( -name '*.so*' -o -path '*/bin/*' \))
}
check_runpaths "$prefix"
module="$prefix/lib/nginx/modules/ngx_http_ratekeeper_module.so"
if [ -e "$build/nginx/ngx_http_ratekeeper_module.so" ]; then
  [ -e "$module" ] || fail "cmake --install did not put the nginx module in place"
  # shellcheck disable=SC2016  # the literal $ORIGIN
  [ "$(runpath "$module")" = '$ORIGIN/../..' ] || fail "the installed nginx module's RUNPATH: $(runpath "$module")"
  # Read whole before matching: with pipefail, `ldd | grep -q` fails whenever grep's early exit kills ldd (SIGPIPE).
  linked=$(ldd "$module")
  grep -q "libratekeeper.so[.0-9]* => $prefix/" <<<"$linked" \
    || fail "the installed nginx module does not find the installed library: $linked"
fi

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
# The unit's Documentation= is in the .deb; nothing in it points into the build tree.
# shellcheck disable=SC2013  # Documentation= is one line of space-separated URLs
for unit_doc in $(sed -n 's|^Documentation=||p' "$src/examples/systemd/ratekeeper.service"); do
  unit_doc=${unit_doc#file://}
  grep -q -- " .$unit_doc\$" <<<"$contents" ||
    fail "the .deb has no $unit_doc (examples/systemd/ratekeeper.service's Documentation=)"
done
dpkg-deb -x "$deb" "$tmp/deb/root"
check_runpaths "$tmp/deb/root"
depends=$(dpkg-deb -f "$deb" Depends)
grep -q libstdc++ <<<"$depends" || fail "the .deb does not depend on libstdc++: $depends"
echo "package: install, find_package, pkg-config and .deb all work"
