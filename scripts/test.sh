#!/usr/bin/env bash
# The test command: on a fresh Debian 12 machine it installs the dependencies,
# configures and builds cairn into build/, then runs every test with ctest
# (database tests start their own PostgreSQL 15 servers; set
# CAIRN_TEST_DATABASE_URL to use an existing server instead). Exits non-zero
# when anything fails. Works from any directory, as root or not.
#
# Besides the tests it checks the habits of CONTRIBUTING.md: the format
# (scripts/check-format.sh) and clang-tidy (scripts/tidy.sh); either failing
# fails the run, after the tests have run.
#
# After the tests, two stages of scripts/sanitize.sh, each in a build folder
# of its own: "address" (the unit tests and a fast subset of the PostgreSQL
# tests under ASan + UBSan, build-asan/) and "fuzz" (each libFuzzer target
# for CAIRN_FUZZ_SECONDS, 15 s, build-fuzz/). Either failing fails the run.
#
# Knobs: CAIRN_BUILD_DIR (build), CAIRN_BUILD_TYPE (RelWithDebInfo),
# CAIRN_TEST_JOBS (2), CAIRN_TEST_TIMEOUT seconds per test (600),
# CAIRN_TIDY=0 skips clang-tidy, CAIRN_SANITIZE_STAGE=0 skips the ASan +
# UBSan stage, CAIRN_FUZZ_STAGE=0 the fuzz stage, and any extra arguments are
# passed to the main ctest run (e.g. scripts/test.sh -L unit).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${CAIRN_BUILD_DIR:-build}
build_type=${CAIRN_BUILD_TYPE:-RelWithDebInfo}
test_jobs=${CAIRN_TEST_JOBS:-2}
test_timeout=${CAIRN_TEST_TIMEOUT:-600}
build_jobs=$(nproc 2>/dev/null || echo 2)

echo "==> dependencies"
bash scripts/install-deps.sh

failed=()
echo "==> format"
bash scripts/check-format.sh || failed+=(format)

echo "==> configure ($build_dir, $build_type)"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" -DBUILD_TESTING=ON

echo "==> build (-j$build_jobs)"
cmake --build "$build_dir" --parallel "$build_jobs"

if [ "${CAIRN_TIDY:-1}" != 0 ]; then
  echo "==> clang-tidy"
  CAIRN_BUILD_DIR="$build_dir" bash scripts/tidy.sh || failed+=(clang-tidy)
fi

echo "==> test (-j$test_jobs)"
# Daemon tests start servers and workers of their own: two at a time is
# plenty on small machines. --no-tests=error: a build that registered no tests
# is a failure, not a green run.
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error \
  --parallel "$test_jobs" --timeout "$test_timeout" "$@" || failed+=(tests)

if [ "${CAIRN_SANITIZE_STAGE:-1}" != 0 ]; then
  echo "==> sanitizers: ASan + UBSan (scripts/sanitize.sh address)"
  bash scripts/sanitize.sh address || failed+=(sanitizers)
fi

if [ "${CAIRN_FUZZ_STAGE:-1}" != 0 ]; then
  echo "==> fuzzing (scripts/sanitize.sh fuzz)"
  bash scripts/sanitize.sh fuzz || failed+=(fuzz)
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all passed"
