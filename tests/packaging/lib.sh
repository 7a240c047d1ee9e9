# Helpers the packaging tests share (sourced, not run). Each test is a bash
# script that ctest runs as `bash <test>.sh <build dir> <source dir>`; it
# exits non-zero at the first failed check, naming what it expected.
set -euo pipefail

build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
test_name=$(basename "$0" .sh)

fail() {
  echo "FAIL ($test_name): $*" >&2
  exit 1
}

note() { echo "$test_name: $*"; }

# A fresh scratch folder under the build folder (not /tmp: plugins load only
# from folders that nobody else can write), removed when the test passes.
scratch=$build_dir/tests/packaging/$test_name
rm -rf "$scratch"
mkdir -p "$scratch"
chmod 0755 "$scratch"
trap 'status=$?; if [ $status -eq 0 ]; then rm -rf "$scratch"; else echo "$test_name: scratch kept in $scratch" >&2; fi' EXIT

expect_file() {  # expect_file PATH [what]
  [ -f "$1" ] || fail "${2:-file} missing: $1"
}

expect_dir() {  # expect_dir PATH MODE
  [ -d "$1" ] || fail "folder missing: $1"
  local mode
  mode=$(stat -c %a "$1")
  [ "$mode" = "$2" ] || fail "$1 has mode $mode, expected $2"
}

expect_contains() {  # expect_contains TEXT NEEDLE WHAT
  grep -qF -- "$2" <<<"$1" || fail "$3: expected to contain \"$2\", got:
$1"
}

expect_lacks() {  # expect_lacks TEXT NEEDLE WHAT
  if grep -qF -- "$2" <<<"$1"; then fail "$3: expected not to contain \"$2\", got:
$1"; fi
}

# The value of the first `Key=` line of a unit file.
unit_value() {  # unit_value FILE KEY
  sed -n "s/^$2=//p" "$1" | head -n1
}

# Every value of `Key=` lines of a unit file, one per line (values that hold
# several space-separated entries are split).
unit_values() {  # unit_values FILE KEY
  sed -n "s/^$2=//p" "$1" | tr ' ' '\n' | sed '/^$/d'
}

# Checks that a root folder (an install or an unpacked package) holds every
# file the unit at UNIT names: the ExecStart binary and its --config file,
# the folder of the LoadCredential= source, the Documentation= files and man
# pages (under MANDIR), the User= account in sysusers.d and the folder of the
# configuration in tmpfiles.d (under SYSTEMD_LIB). Paths are absolute as
# installed; ROOT ("" for a prefix install) goes in front of them.
check_unit_files() {  # check_unit_files ROOT UNIT SYSTEMD_LIB MANDIR
  local root=$1 unit=$2 systemd_lib=$3 mandir=$4
  local exec binary config credential user doc found=0
  exec=$(unit_value "$unit" ExecStart)
  binary=${exec%% *}
  [ -x "$root$binary" ] || fail "ExecStart binary $binary is not in ${root:-the install}"
  config=$(sed -n 's/.*--config \([^ ]*\).*/\1/p' <<<"$exec")
  [ -n "$config" ] || fail "ExecStart names no --config: $exec"
  expect_file "$root$config" "configuration named by ExecStart"
  credential=$(unit_value "$unit" LoadCredential)
  [ -n "$credential" ] || fail "the unit loads no credential"
  [ -d "$root$(dirname "${credential#*:}")" ] ||
    fail "the folder of the credential ${credential#*:} is not in ${root:-the install}"
  while read -r doc; do
    case $doc in
      file://*) expect_file "$root${doc#file://}" "Documentation= file" ;;
      man:*)
        local page=${doc#man:} name section
        name=${page%%(*}
        section=${page#*(}
        section=${section%)}
        compgen -G "$root$mandir/man$section/$name.$section*" >/dev/null ||
          fail "Documentation= man page $page is not in $root$mandir/man$section"
        ;;
      *) fail "Documentation= $doc is neither file:// nor man:" ;;
    esac
    found=$((found + 1))
  done < <(unit_values "$unit" Documentation)
  [ "$found" -ge 2 ] || fail "the unit documents itself with $found entries, expected 2 or more"
  user=$(unit_value "$unit" User)
  grep -qE "^u $user " "$root$systemd_lib/sysusers.d/cairn.conf" ||
    fail "User=$user has no line in sysusers.d/cairn.conf"
  grep -qE "^d $(dirname "$config") " "$root$systemd_lib/tmpfiles.d/cairn.conf" ||
    fail "tmpfiles.d/cairn.conf does not create $(dirname "$config")"
}
