#!/usr/bin/env bash
# The sanitizer and fuzzing runs (CONTRIBUTING.md, "Sanitizers and fuzzing").
# Each mode builds only the targets it runs and exits non-zero when anything
# fails:
#   address  build-sanitize/ (clang, ASan + UBSan): every unit test (ctest -L
#            unit, but the packaging scripts) and a fast subset of the
#            PostgreSQL tests: the store's (^Store) and daemon end-to-end
#            tests that start real daemons, whose steps run in step processes
#            (`cairn step-host`) that load the plugins with dlopen.
#   fuzz     build-sanitize/ too: each libFuzzer target of tests/fuzz for a
#            bounded time, starting from its committed seed corpus
#            (tests/fuzz/corpus/<target>/). Sharing the folder (configured
#            with CAIRN_FUZZ=ON, whose coverage instrumentation the tests
#            ignore) compiles cairn's libraries once for both modes.
#   thread   build-tsan/: TSan; the address mode's tests. Slower: not part
#            of CI.
# Every process a test starts (daemons, step processes) writes its sanitizer
# reports to <build>/sanitizer-reports/; any report fails the run, even one
# from a step process whose crash the daemon survived.
#
# Knobs: CAIRN_FUZZ_SECONDS per fuzz target (15), CAIRN_FUZZ_TARGETS (all,
# space-separated), CAIRN_TEST_JOBS (2), CAIRN_BUILD_JOBS (nproc), and any
# extra arguments go to ctest instead of the default test selection (e.g.
# scripts/sanitize.sh address -R '^Config'). scripts/test.sh runs the fuzz
# mode, and then the address mode.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=${1:-}
shift || true
test_jobs=${CAIRN_TEST_JOBS:-2}
build_jobs=${CAIRN_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
fuzz_seconds=${CAIRN_FUZZ_SECONDS:-15}

# The PostgreSQL tests of the subset: the store's, and daemon end-to-end
# tests with real daemons and step processes (about a minute under ASan).
pg_targets=(store_pgtest daemon_e2e_pgtest)
pg_tests='^Store|^DaemonE2E\.(KillNineMidStep|RetriesBackOff|SigtermLetsSteps|TransactionalWrites|TransactionControl)'
# The packaging scripts install and package the tree: nothing a sanitizer
# looks at.
unit_excluded='^(packaging_|OpsAlerts\.)'

# A Debug build at -O1: compiles much faster than -O2, and runs fast enough.
# -g1 keeps the line tables that reports need and compiles some 12% faster.
sanitizer_build_flags=(-DCMAKE_BUILD_TYPE=Debug
  "-DCMAKE_C_FLAGS_DEBUG=-O1 -g1"
  "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1")

bash scripts/install-deps.sh
source scripts/build-cache.sh

# Runs the unit tests and the PostgreSQL subset in $1 with sanitizer reports
# going to $1/sanitizer-reports, then fails on a failed test or any report.
run_tests() {
  local build_dir=$1
  shift
  local reports=$PWD/$build_dir/sanitizer-reports
  rm -rf "$reports"
  mkdir -p "$reports"
  export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:check_initialization_order=1:strict_init_order=1"
  export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
  export TSAN_OPTIONS="log_path=$reports/tsan:second_deadlock_stack=1"
  local failed=0
  local ctest=(ctest --test-dir "$build_dir" --output-on-failure --no-tests=error
    --parallel "$test_jobs" --timeout 600)
  if [ $# -gt 0 ]; then
    "${ctest[@]}" "$@" || failed=1
  else
    echo "==> unit tests"
    "${ctest[@]}" -L unit -E "$unit_excluded" || failed=1
    echo "==> PostgreSQL tests (subset)"
    "${ctest[@]}" -R "$pg_tests" || failed=1
  fi
  if [ -n "$(ls -A "$reports")" ]; then
    echo "sanitize.sh: sanitizer reports in $reports:" >&2
    for report in "$reports"/*; do
      echo "---- $report" >&2
      cat "$report" >&2
    done
    failed=1
  fi
  return $failed
}

# The clang build folder the address and fuzz modes share.
shared_build_dir=build-sanitize
configure_shared() {
  echo "==> configure $shared_build_dir (clang, CAIRN_FUZZ=ON: ASan + UBSan)"
  cmake -S . -B "$shared_build_dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCAIRN_FUZZ=ON -DBUILD_TESTING=ON "${sanitizer_build_flags[@]}" "${build_speed_flags[@]}" \
    >/dev/null
}

address_run() {
  configure_shared
  echo "==> build"
  cmake --build "$shared_build_dir" --parallel "$build_jobs" \
    --target cairn_unit_tests "${pg_targets[@]}"
  run_tests "$shared_build_dir" "$@"
}

thread_run() {
  local build_dir=build-tsan
  echo "==> configure $build_dir (CAIRN_SANITIZE=thread)"
  cmake -S . -B "$build_dir" -DCAIRN_SANITIZE=thread -DBUILD_TESTING=ON \
    "${sanitizer_build_flags[@]}" "${build_speed_flags[@]}" >/dev/null
  echo "==> build"
  cmake --build "$build_dir" --parallel "$build_jobs" --target cairn_unit_tests "${pg_targets[@]}"
  run_tests "$build_dir" "$@"
}

fuzz_run() {
  local build_dir=$shared_build_dir
  configure_shared
  local targets
  if [ -n "${CAIRN_FUZZ_TARGETS:-}" ]; then
    read -r -a targets <<<"$CAIRN_FUZZ_TARGETS"
  else
    mapfile -t targets < <(ls tests/fuzz/corpus)
  fi
  echo "==> build ${targets[*]}"
  cmake --build "$build_dir" --parallel "$build_jobs" --target "${targets[@]}"
  export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  local failed=()
  for target in "${targets[@]}"; do
    echo "==> fuzz $target (${fuzz_seconds}s)"
    # New inputs go to the build folder; the committed seeds stay as they are.
    local scratch=$build_dir/corpus/$target artifacts=$build_dir/artifacts/$target
    mkdir -p "$scratch" "$artifacts"
    if ! "$build_dir/tests/fuzz/$target" -max_total_time="$fuzz_seconds" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" \
      "$scratch" "tests/fuzz/corpus/$target" 2>"$build_dir/$target.log"; then
      tail -n 60 "$build_dir/$target.log" >&2
      echo "sanitize.sh: $target found a crash: $artifacts/" >&2
      failed+=("$target")
    else
      grep -E '^stat::number_of_executed_units|^Done' "$build_dir/$target.log" || true
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "sanitize.sh: fuzz targets failed: ${failed[*]}" >&2
    return 1
  fi
}

case $mode in
  address) address_run "$@" ;;
  thread) thread_run "$@" ;;
  fuzz) fuzz_run ;;
  *)
    echo "usage: scripts/sanitize.sh address|thread|fuzz [ctest arguments]" >&2
    exit 2
    ;;
esac
echo "sanitize.sh: $mode passed"
