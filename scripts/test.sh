#!/usr/bin/env bash
# The test command: on a fresh Debian 12 machine it installs the dependencies,
# configures and builds cairn into build/, then runs every test with ctest
# (database tests start their own PostgreSQL 15 servers; set
# CAIRN_TEST_DATABASE_URL to use an existing server instead). Exits non-zero
# when anything fails. Works from any directory, as root or not.
#
# Besides the tests it checks the format (scripts/check-format.sh), which
# fails the run after the tests have run. clang-tidy (scripts/tidy.sh) runs
# only with CAIRN_TIDY=1: over every source it takes about 50 s of CPU a file,
# some 20 minutes on two cores, more than CI's budget leaves; CONTRIBUTING.md
# asks for it on the files a change touches, before committing.
#
# After the tests, two stages of scripts/sanitize.sh share one clang build
# folder (build-sanitize/, ASan + UBSan), so cairn's libraries compile once
# for both: "fuzz" runs each libFuzzer target for CAIRN_FUZZ_SECONDS (10 s
# here); "address" then runs the unit tests and a fast subset of the
# PostgreSQL tests under ASan + UBSan (CAIRN_SANITIZE_STAGE=0 skips it). Both
# together add some 7 minutes on two cores; precompiled headers
# (cmake/PrecompiledHeaders.cmake) keep CI inside its 30. Either failing
# fails the run. Both builds go through ccache and lld when they are there
# (scripts/build-cache.sh): a clone of sources built before compiles only
# what changed.
#
# Knobs: CAIRN_BUILD_DIR (build), CAIRN_BUILD_TYPE (RelWithDebInfo),
# CAIRN_TEST_JOBS (2), CAIRN_TEST_TIMEOUT seconds per test (600),
# CAIRN_TIDY=1 adds clang-tidy over every source, CAIRN_SANITIZE_STAGE=0 skips
# the ASan + UBSan stage, CAIRN_FUZZ_STAGE=0 the fuzz stage, and any extra
# arguments are passed to the main ctest run (e.g. scripts/test.sh -L unit).
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
source scripts/build-cache.sh
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" -DBUILD_TESTING=ON \
  "${build_speed_flags[@]}"

echo "==> build (-j$build_jobs)"
cmake --build "$build_dir" --parallel "$build_jobs"

if [ "${CAIRN_TIDY:-0}" = 1 ]; then
  echo "==> clang-tidy"
  CAIRN_BUILD_DIR="$build_dir" bash scripts/tidy.sh || failed+=(clang-tidy)
fi

echo "==> test (-j$test_jobs)"
# Daemon tests start servers and workers of their own: two at a time is
# plenty on small machines. --no-tests=error: a build that registered no tests
# is a failure, not a green run.
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error \
  --parallel "$test_jobs" --timeout "$test_timeout" "$@" || failed+=(tests)

# Fuzzing first: the address stage then reuses the libraries it compiled
# (both build in build-sanitize/).
if [ "${CAIRN_FUZZ_STAGE:-1}" != 0 ]; then
  echo "==> fuzzing (scripts/sanitize.sh fuzz)"
  CAIRN_FUZZ_SECONDS=${CAIRN_FUZZ_SECONDS:-10} bash scripts/sanitize.sh fuzz || failed+=(fuzz)
fi

if [ "${CAIRN_SANITIZE_STAGE:-1}" != 0 ]; then
  echo "==> sanitizers: ASan + UBSan (scripts/sanitize.sh address)"
  bash scripts/sanitize.sh address || failed+=(sanitizers)
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all passed"
