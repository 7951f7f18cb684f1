#!/usr/bin/env bash
# The tree is formatted by .clang-format (nginx/ keeps nginx's style: nginx/.clang-format): every C and C++ file git
# tracks, or that is new and not ignored, is as clang-format would write it. On a failure it names each file;
# `clang-format -i FILE` (or `git clang-format` for what you changed) formats it.
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/deps installs it)" >&2; exit 1; }
mapfile -t files < <( { git ls-files; git ls-files --others --exclude-standard; } |
                       grep -E '\.(cc|h|c|cpp|hpp)$' | grep -v '^nginx/' | sort -u)
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted by .clang-format: %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "${#files[@]} files formatted by .clang-format"
