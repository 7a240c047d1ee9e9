#!/usr/bin/env bash
# The Debian packages (cmake/Packaging.cmake): CPack builds cairn and
# cairn-dev from the build folder; their control fields, dependencies (each
# one satisfiable on this Debian), conffiles and maintainer scripts are
# right; they hold what an operator and a plugin author need and no test
# fixture; every file the unit refers to is in the package; the packaged
# unit, configuration and snippets are the source's files unchanged. As root,
# dpkg installs both into a scratch root (maintainer scripts included: the
# account and folders appear; without systemd, as in the Docker image, the
# account comes from useradd), keeps an edited conffile over a reinstall and
# a removal, and purges it.
source "$(dirname "$0")/lib.sh"

version=$("$build_dir/daemon/cairn" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
out=$scratch/out
note "cpack -G DEB (cairn $version, $arch)"
cpack --config "$build_dir/CPackConfig.cmake" -G DEB -B "$out" >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log"; fail "cpack failed"; }
deb=$out/cairn_${version}_${arch}.deb
dev=$out/cairn-dev_${version}_all.deb
expect_file "$deb" "package"
expect_file "$dev" "package"

field() { dpkg-deb -f "$1" "$2"; }

# Control fields.
[ "$(field "$deb" Package)" = cairn ] || fail "Package is $(field "$deb" Package)"
[ "$(field "$deb" Version)" = "$version" ] || fail "Version is $(field "$deb" Version)"
[ "$(field "$deb" Architecture)" = "$arch" ] || fail "Architecture is $(field "$deb" Architecture)"
[ "$(field "$dev" Architecture)" = all ] || fail "cairn-dev's Architecture is not all"
[ -n "$(field "$deb" Maintainer)" ] || fail "no Maintainer"
expect_contains "$(field "$deb" Description)" "durable workflow worker daemon for PostgreSQL" \
  "cairn's Description"
expect_contains "$(field "$dev" Description)" "plugin SDK" "cairn-dev's Description"
depends=$(field "$deb" Depends)
for library in libpqxx-6.4 libyaml-cpp0.7 libspdlog1.10 libfmt9 libboost-program-options1.74.0 \
  libsystemd0 libssl3 libstdc++6 libc6 passwd; do
  expect_contains "$depends" "$library" "cairn's Depends (from dpkg-shlibdeps)"
done
expect_contains "$(field "$dev" Depends)" "nlohmann-json3-dev" "cairn-dev's Depends"

# Every dependency names a Debian package that this Debian 12 has installed
# in a version that satisfies it (the build host runs the same libraries).
while read -r dependency; do
  name=${dependency%% *}
  installed=$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null) ||
    fail "Depends names $name, which this Debian does not have installed"
  if [[ $dependency =~ \((\>=|\>\>|=|\<=|\<\<)\ ([^\)]+)\) ]]; then
    op=${BASH_REMATCH[1]}
    wanted=${BASH_REMATCH[2]}
    case $op in '>=') op=ge ;; '>>') op=gt ;; '=') op=eq ;; '<=') op=le ;; '<<') op=lt ;; esac
    dpkg --compare-versions "$installed" "$op" "$wanted" ||
      fail "Depends wants $dependency; this Debian has $name $installed"
  fi
done < <(tr ',' '\n' <<<"$depends" | sed 's/^ *//; /^$/d')

# Conffiles and maintainer scripts.
[ "$(dpkg-deb -I "$deb" conffiles)" = /etc/cairn/cairn.yaml ] ||
  fail "conffiles: $(dpkg-deb -I "$deb" conffiles)"
for script in postinst prerm; do
  dpkg-deb -I "$deb" "$script" >"$scratch/$script" || fail "no $script in the package"
  sh -n "$scratch/$script" || fail "$script is not valid sh"
done

# Contents: owned by root, with the expected files, and no fixture.
listing=$(dpkg-deb -c "$deb")
if awk '$2 != "root/root"' <<<"$listing" | grep -q .; then
  fail "files not owned by root: $(awk '$2 != "root/root"' <<<"$listing")"
fi
for path in ./usr/bin/cairn ./usr/lib/cairn/plugins/example.so ./usr/lib/cairn/plugins/noop.so \
  ./usr/lib/systemd/system/cairn.service ./usr/lib/sysusers.d/cairn.conf \
  ./usr/lib/tmpfiles.d/cairn.conf ./etc/cairn/cairn.yaml ./usr/share/man/man1/cairn.1.gz \
  ./usr/share/doc/cairn/README.md ./usr/share/doc/cairn/operations.md \
  ./usr/share/doc/cairn/examples/cairn.yaml ./usr/share/doc/cairn/examples/workflows/example.yaml; do
  awk '{print $6}' <<<"$listing" | grep -qxF "$path" || fail "$path is not in $deb"
done
grep -qE '^drwx------ root/root .* \./etc/cairn/credentials/$' <<<"$listing" ||
  fail "/etc/cairn/credentials is not a folder of mode 0700 in the package"
expect_lacks "$listing" "test_steps" "cairn's contents"
expect_lacks "$listing" "fixtures" "cairn's contents"
expect_lacks "$listing" "my_plugin" "cairn's contents"
expect_lacks "$listing" "/usr/local" "cairn's contents"
dev_listing=$(dpkg-deb -c "$dev")
for path in ./usr/include/cairn/plugin.h ./usr/include/cairn/sdk.hpp \
  ./usr/share/cmake/cairn/cairnConfig.cmake ./usr/share/cmake/cairn/cairnPlugin.cmake \
  ./usr/share/pkgconfig/cairn.pc; do
  awk '{print $6}' <<<"$dev_listing" | grep -qxF "$path" || fail "$path is not in $dev"
done

# Every file the unit refers to is in the package; the unit, configuration
# and snippets are the source's own (the package's layout is theirs).
unpacked=$scratch/unpacked
dpkg-deb -x "$deb" "$unpacked"
dpkg-deb -x "$dev" "$unpacked"
unit=$unpacked/usr/lib/systemd/system/cairn.service
check_unit_files "$unpacked" "$unit" /usr/lib /usr/share/man
cmp -s "$unit" "$source_dir/systemd/cairn.service" || fail "the packaged unit differs from systemd/"
cmp -s "$unpacked/etc/cairn/cairn.yaml" "$source_dir/config/cairn.yaml" ||
  fail "/etc/cairn/cairn.yaml differs from config/cairn.yaml"
cmp -s "$unpacked/usr/lib/tmpfiles.d/cairn.conf" "$source_dir/systemd/cairn.tmpfiles" ||
  fail "tmpfiles.d/cairn.conf differs from systemd/cairn.tmpfiles"
cmp -s "$unpacked/usr/lib/sysusers.d/cairn.conf" "$source_dir/systemd/cairn.sysusers" ||
  fail "sysusers.d/cairn.conf differs from systemd/cairn.sysusers"
grep -qx 'prefix=/usr' "$unpacked/usr/share/pkgconfig/cairn.pc" || fail "cairn.pc: prefix is not /usr"

# cairn-dev's CMake package is found where it was unpacked (it is
# relocatable) and points at its headers.
mkdir -p "$scratch/consumer"
cat >"$scratch/consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(consumer LANGUAGES CXX)
find_package(cairn REQUIRED)
get_target_property(includes cairn::sdk INTERFACE_INCLUDE_DIRECTORIES)
message(STATUS "cairn includes: ${includes}")
message(STATUS "cairn plugins: ${CAIRN_PLUGIN_INSTALL_DIR}")
EOF
consumer=$(cmake -S "$scratch/consumer" -B "$scratch/consumer/build" \
  -DCMAKE_PREFIX_PATH="$unpacked/usr" 2>&1) || { echo "$consumer"; fail "find_package(cairn) failed"; }
expect_contains "$consumer" "cairn includes: $unpacked/usr/include" "find_package(cairn)"
expect_contains "$consumer" "cairn plugins: $unpacked/usr/lib/cairn/plugins" "find_package(cairn)"

# dpkg into a scratch root, maintainer scripts included (they honour
# DPKG_ROOT); the libraries are the host's, so dependencies are forced.
if [ "$(id -u)" -ne 0 ]; then
  note "not root: skipping the dpkg --root install"
  note "passed"
  exit 0
fi
root=$scratch/root
mkdir -p "$root"/var/lib/dpkg/{info,updates,triggers} "$root/etc"
touch "$root/var/lib/dpkg/status"
dpkg_root() {
  dpkg --root="$root" --log="$scratch/dpkg.log" --force-depends --force-script-chrootless "$@" \
    >>"$scratch/dpkg.out" 2>&1 || { cat "$scratch/dpkg.out"; fail "dpkg $* failed"; }
}
note "dpkg --root $root -i"
dpkg_root -i "$deb" "$dev"
[ "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}' cairn)" = \
  "install ok installed" ] || fail "cairn is not installed in the scratch root"
grep -qE '^cairn:x:[0-9]+:[0-9]+:cairn workflow worker:/:/usr/sbin/nologin$' "$root/etc/passwd" ||
  fail "postinst made no cairn account: $(cat "$root/etc/passwd" 2>&1)"
grep -q '^cairn:' "$root/etc/group" || fail "postinst made no cairn group"
expect_dir "$root/etc/cairn/credentials" 700
expect_dir "$root/etc/cairn/workflows" 755
[ -x "$root/usr/bin/cairn" ] || fail "no /usr/bin/cairn in the scratch root"
"$root/usr/bin/cairn" --version | grep -qx "cairn $version" || fail "the installed cairn's version"

# Without systemd (the Docker image), postinst makes the same account with
# useradd; running it again changes nothing.
bare=$scratch/bare
mkdir -p "$bare/etc" "$bare/bin"
touch "$bare"/etc/{passwd,group,shadow,gshadow}
for tool in sh grep useradd; do ln -s "$(type -P "$tool")" "$bare/bin/$tool"; done
for _ in 1 2; do
  env -i PATH="$bare/bin" DPKG_ROOT="$bare" sh "$scratch/postinst" configure ||
    fail "postinst without systemd failed"
done
[ "$(cat "$bare/etc/passwd")" = "$(grep '^cairn:' "$root/etc/passwd")" ] ||
  fail "postinst without systemd made $(cat "$bare/etc/passwd"), with it $(grep '^cairn:' "$root/etc/passwd")"

# The configuration is a conffile: edits survive a reinstall and a removal;
# a purge removes it.
echo "# edited by the operator" >>"$root/etc/cairn/cairn.yaml"
dpkg_root -i "$deb"
grep -q "edited by the operator" "$root/etc/cairn/cairn.yaml" || fail "a reinstall lost the edit"
[ "$(grep -c '^cairn:' "$root/etc/passwd")" = 1 ] || fail "a reinstall made a second account"
dpkg_root -r cairn
[ ! -e "$root/usr/bin/cairn" ] || fail "removing cairn left /usr/bin/cairn"
grep -q "edited by the operator" "$root/etc/cairn/cairn.yaml" || fail "a removal lost the conffile"
dpkg_root --purge cairn
[ ! -e "$root/etc/cairn/cairn.yaml" ] || fail "purging cairn left /etc/cairn/cairn.yaml"

note "passed"
