#!/usr/bin/env bash
# The systemd unit as installed (`cmake --install --prefix /usr` into a
# scratch root, the package's layout): `systemd-analyze verify` passes, which
# checks the unit's syntax, that ExecStart/ExecReload binaries exist and that
# the man page of Documentation= is found; `systemd-analyze security` rates
# its exposure at most 1.2; it keeps Type=notify, the watchdog and a start
# limit; its LoadCredential= name is the credential config/cairn.yaml tells
# database.url_credential to name; and the sysusers.d and tmpfiles.d snippets
# create the account and the folders.
#
# systemd-analyze needs no running systemd for this: --root points verify at
# the scratch root (which gets copies of the host's units, for the
# dependencies every service has, and of /usr/bin/kill, for ExecReload), and
# security --offline rates the unit file alone.
source "$(dirname "$0")/lib.sh"

command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (package systemd)"
root=$scratch/root
mkdir -p "$root/usr/lib/systemd" "$root/usr/bin" "$root/etc"
ln -s usr/bin "$root/bin"
ln -s usr/lib "$root/lib"
for units in /usr/lib/systemd/system /lib/systemd/system; do
  [ -d "$units" ] && cp -a "$units" "$root/usr/lib/systemd/" && break
done
cp "$(type -P kill)" "$root/usr/bin/kill"
DESTDIR=$root cmake --install "$build_dir" --prefix /usr --component runtime \
  >"$scratch/install.log" || { cat "$scratch/install.log"; fail "cmake --install failed"; }
unit=$root/usr/lib/systemd/system/cairn.service
cmp -s "$unit" "$source_dir/systemd/cairn.service" ||
  fail "the unit installed with --prefix /usr differs from systemd/cairn.service"

note "systemd-analyze verify"
verify=$(MANPATH=$root/usr/share/man systemd-analyze verify --root="$root" cairn.service 2>&1) ||
  fail "systemd-analyze verify failed: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify complained: $verify"

note "systemd-analyze security"
security=$(systemd-analyze security --offline=true --root="$root" cairn.service 2>&1) ||
  fail "systemd-analyze security failed: $security"
exposure=$(sed -n 's/.*Overall exposure level for cairn.service: \([0-9.]*\).*/\1/p' <<<"$security")
[ -n "$exposure" ] || fail "no exposure level in: $security"
awk -v e="$exposure" 'BEGIN { exit !(e <= 1.2) }' ||
  fail "exposure $exposure is above 1.2: $(grep '✗' <<<"$security")"
note "exposure $exposure"
# The same through systemd-analyze's own threshold (tenths).
systemd-analyze security --offline=true --root="$root" --threshold=12 cairn.service >/dev/null ||
  fail "systemd-analyze security --threshold=12 failed"

# What the daemon relies on.
[ "$(unit_value "$unit" Type)" = notify ] || fail "Type= is not notify"
[ -n "$(unit_value "$unit" WatchdogSec)" ] || fail "no WatchdogSec="
[ -n "$(unit_value "$unit" StartLimitIntervalSec)" ] || fail "no StartLimitIntervalSec="
burst=$(unit_value "$unit" StartLimitBurst)
[[ $burst =~ ^[0-9]+$ ]] && [ "$burst" -gt 0 ] || fail "StartLimitBurst= is \"$burst\""
[ "$(unit_value "$unit" Restart)" = on-failure ] || fail "Restart= is not on-failure"

# The credential name is the one the configuration reference documents.
documented=$(sed -n 's/^ *# *url_credential: *\([A-Za-z0-9_.-]*\).*/\1/p' \
  "$source_dir/config/cairn.yaml")
[ -n "$documented" ] || fail "config/cairn.yaml documents no url_credential example"
credential=$(unit_value "$unit" LoadCredential)
[ "${credential%%:*}" = "$documented" ] ||
  fail "LoadCredential= names \"${credential%%:*}\", config/cairn.yaml documents \"$documented\""
check_unit_files "$root" "$unit" /usr/lib /usr/share/man

# The console's unit: as valid and as confined, with the same database
# credential, and read-only unless a drop-in loads the console's token.
console_unit=$root/usr/lib/systemd/system/cairn-console.service
cmp -s "$console_unit" "$source_dir/systemd/cairn-console.service" ||
  fail "the console unit installed with --prefix /usr differs from systemd/cairn-console.service"
verify=$(MANPATH=$root/usr/share/man systemd-analyze verify --root="$root" cairn-console.service 2>&1) ||
  fail "systemd-analyze verify cairn-console.service failed: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify complained about cairn-console.service: $verify"
systemd-analyze security --offline=true --root="$root" --threshold=12 cairn-console.service >/dev/null ||
  fail "cairn-console.service is exposed above 1.2: $(systemd-analyze security --offline=true \
    --root="$root" cairn-console.service 2>&1 | grep '✗')"
[ "$(unit_value "$console_unit" LoadCredential)" = "$credential" ] ||
  fail "cairn-console.service loads $(unit_value "$console_unit" LoadCredential), not $credential"
grep -q "LoadCredential=console-token:" "$console_unit" ||
  fail "cairn-console.service does not say how to load the console-token credential"

# The snippets do what they say, in the scratch root.
systemd-sysusers --root="$root" cairn.conf >"$scratch/sysusers.log" 2>&1 ||
  { cat "$scratch/sysusers.log"; fail "systemd-sysusers failed"; }
user=$(unit_value "$unit" User)
grep -q "^$user:x:[0-9]*:[0-9]*:cairn workflow worker:/:/usr/sbin/nologin$" "$root/etc/passwd" ||
  fail "sysusers.d/cairn.conf made no $user account: $(cat "$root/etc/passwd")"
grep -q "^$(unit_value "$unit" Group):" "$root/etc/group" || fail "no Group= group"
rm -rf "$root/etc/cairn"
systemd-tmpfiles --root="$root" --create cairn.conf >"$scratch/tmpfiles.log" 2>&1 ||
  { cat "$scratch/tmpfiles.log"; fail "systemd-tmpfiles failed"; }
expect_dir "$root/etc/cairn" 755
expect_dir "$root/etc/cairn/workflows" 755
expect_dir "$root/etc/cairn/credentials" 700

note "passed"
