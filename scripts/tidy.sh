#!/usr/bin/env bash
# Runs clang-tidy with the checks in .clang-tidy over the sources of core/ and
# daemon/, using the compile commands of the build folder (default build/,
# or $CAIRN_BUILD_DIR; configure it first, as scripts/test.sh does). Every
# warning is an error; exits non-zero when there is one. Extra arguments are
# regular expressions that narrow the files (e.g. scripts/tidy.sh engine/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${CAIRN_BUILD_DIR:-build}
[ -f "$build_dir/compile_commands.json" ] ||
  { echo "tidy: no $build_dir/compile_commands.json; configure the build first" >&2; exit 2; }
files=$(git ls-files 'core/*.cpp' 'daemon/*.cpp')
for filter in "$@"; do files=$(grep -E -- "$filter" <<<"$files" || true); done
[ -n "$files" ] || { echo "tidy: no files match" >&2; exit 2; }
# run-clang-tidy takes file regexes; anchor each file to the checkout.
root=$(pwd)
mapfile -t patterns < <(sed "s|^|^$root/|; s|\\.|\\\\.|g; s|$|\$|" <<<"$files")
# clang cannot read GCC's precompiled headers: tidy each file on its own
# headers, with the compile commands minus the precompiled-header flags.
tidy_db=$build_dir/tidy
mkdir -p "$tidy_db"
sed -E 's# -Winvalid-pch##g; s# -include [^ ]*/cmake_pch\.hxx##g' \
  "$build_dir/compile_commands.json" >"$tidy_db/compile_commands.json"
echo "tidy: $(wc -l <<<"$files") files, -j$(nproc)"
run-clang-tidy -p "$tidy_db" -j "$(nproc)" -quiet "${patterns[@]}" >"$build_dir/tidy.log" 2>&1 ||
  { sed "s/\x1b\[[0-9;]*m//g" "$build_dir/tidy.log" | grep -E "(warning|error):" | sort -u >&2 ||
    cat "$build_dir/tidy.log" >&2; exit 1; }
echo "tidy: no warnings"
