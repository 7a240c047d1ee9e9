#!/usr/bin/env bash
# Installs the Debian 12 packages cairn needs to build, test and run.
# Idempotent: installs only what is missing; safe to run on every CI start.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  ccache lld  # scripts/build-cache.sh: cached compiles and a faster linker for CI's builds
  libpqxx-dev libpq-dev libssl-dev
  libyaml-cpp-dev
  libspdlog-dev libfmt-dev
  libboost-program-options-dev
  libgtest-dev libgmock-dev
  nlohmann-json3-dev
  libsystemd-dev
  prometheus-cpp-dev libcivetweb-dev
  prometheus  # promtool: the tests check the metrics, alert rules and alert tests with it
  postgresql-15 postgresql-client-15 pgbouncer  # postgresql-15 also brings pgbench, the ceiling of `cairn bench`
  procps util-linux
  clang-format clang-tidy
  clang libclang-rt-14-dev  # libFuzzer and clang's sanitizer runtimes (scripts/sanitize.sh fuzz)
  dpkg-dev file systemd man-db groff-base mandoc strace
  chromium chromium-driver python3-selenium  # the console's browser tests (tests/console)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
