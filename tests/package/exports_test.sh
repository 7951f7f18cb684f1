#!/usr/bin/env bash
# The shared library exports the public API and nothing else (hidden visibility, RK_EXPORT): no rk::core::,
# rk::store:: (its shm:: included) or test-hook symbol may be visible to whoever loads libratekeeper.so.
set -euo pipefail
lib=$1
exported=$(nm -D --defined-only -C "$lib" | cut -d' ' -f3-)
leaks=$(grep -E 'rk::(core|store|service|rules|sim|cli|server)::|rk::[a-z_]+::\(anonymous' <<<"$exported" || true)
if [ -n "$leaks" ]; then
  echo "internal symbols exported from $lib:" >&2
  echo "$leaks" >&2
  exit 1
fi
# ...and does export the API: the C entry points and the C++ classes.
for sym in rk_limiter_check rk_limiter_check_many rk_shared_check rk_format_headers 'rk::Limiter::check(' 'rk::Limiter::check_many(' 'rk::SharedLimiter::open(' 'rk::validate('; do
  grep -qF "$sym" <<<"$exported" || { echo "$lib does not export $sym" >&2; exit 1; }
done
echo "$(wc -l <<<"$exported") symbols exported, none internal"
