#!/usr/bin/env bash
# `cmake --install` into a scratch prefix: installs what an operator and a
# plugin author need (and no test fixture), with every path in the unit, the
# configuration and cairn.pc rewritten for that prefix; the installed cairn
# loads the installed plugins through the installed configuration; and
# plugins/template, configured against the prefix with find_package(cairn)
# (and a plugin compiled with pkg-config's flags), builds a plugin that the
# real loader lists with its steps. Re-installing keeps an edited config.
source "$(dirname "$0")/lib.sh"

prefix=$scratch/prefix
note "installing into $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$scratch/install.log" ||
  { cat "$scratch/install.log"; fail "cmake --install failed"; }

# What is installed.
for f in bin/cairn include/cairn/plugin.h include/cairn/sdk.hpp \
  lib/systemd/system/cairn.service lib/sysusers.d/cairn.conf lib/tmpfiles.d/cairn.conf \
  etc/cairn/cairn.yaml share/man/man1/cairn.1.gz \
  share/doc/cairn/README.md share/doc/cairn/CONTRIBUTING.md share/doc/cairn/operations.md \
  share/doc/cairn/decisions.md share/doc/cairn/examples/cairn.yaml \
  share/doc/cairn/examples/workflows/example.yaml share/doc/cairn/examples/workflows/bench.yaml \
  share/doc/cairn/examples/example-plugin/schema.sql \
  share/cmake/cairn/cairnConfig.cmake share/cmake/cairn/cairnConfigVersion.cmake \
  share/cmake/cairn/cairnTargets.cmake share/cmake/cairn/cairnPlugin.cmake \
  share/pkgconfig/cairn.pc; do
  expect_file "$prefix/$f" "installed file"
done
for doc in "$source_dir"/docs/*.md; do
  expect_file "$prefix/share/doc/cairn/$(basename "$doc")" "document"
done
expect_dir "$prefix/etc/cairn/credentials" 700
expect_dir "$prefix/etc/cairn/workflows" 755
# The plugin folder: <prefix>/<CAIRN_INSTALL_PLUGINDIR>, as cairn.pc says.
plugin_dir=$prefix/$(sed -n 's/^CAIRN_INSTALL_PLUGINDIR:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
[ "$(sed -n 's/^plugindir=//p' "$prefix/share/pkgconfig/cairn.pc")" = "$plugin_dir" ] ||
  fail "cairn.pc's plugindir is not $plugin_dir"
shipped=$(cd "$plugin_dir" && ls)
[ "$shipped" = "example.so
noop.so" ] || fail "the plugin folder should hold example.so and noop.so only, holds: $shipped"
if find "$prefix" -name 'test_steps*' -o -name 'fixtures' -o -name 'my_plugin*' | grep -q .; then
  fail "test fixtures were installed: $(find "$prefix" -name 'test_steps*' -o -name 'fixtures')"
fi

# Paths rewritten for the prefix: nothing still points at the package's.
unit=$prefix/lib/systemd/system/cairn.service
for f in "$unit" "$prefix/etc/cairn/cairn.yaml" "$prefix/lib/tmpfiles.d/cairn.conf"; do
  if grep -nE '(^|[^a-z/])/(usr|etc)/' "$f" | grep -v "$prefix" | grep -q .; then
    fail "$f still names a path outside $prefix: $(grep -nE '(^|[^a-z/])/(usr|etc)/' "$f" |
      grep -v "$prefix" | head -3)"
  fi
done
[ "$(unit_value "$unit" ExecStart)" = "$prefix/bin/cairn run --config $prefix/etc/cairn/cairn.yaml" ] ||
  fail "ExecStart is $(unit_value "$unit" ExecStart)"
check_unit_files "" "$unit" "$prefix/lib" "$prefix/share/man"
zcat "$prefix/share/man/man1/cairn.1.gz" | grep -qF "$prefix/etc/cairn/cairn.yaml" ||
  fail "the installed manual does not name $prefix/etc/cairn/cairn.yaml"

# The installed binary, configuration and plugins work together.
config=$prefix/etc/cairn/cairn.yaml
listing=$("$prefix/bin/cairn" plugins --config "$config") ||
  fail "cairn plugins --config $config failed"
expect_contains "$listing" "example.so" "cairn plugins with the installed configuration"
expect_contains "$listing" "noop.so" "cairn plugins with the installed configuration"

# plugins/template, built out of tree against the installed CMake package and
# installed into the prefix's plugin folder by its own install rule.
note "building plugins/template against $prefix"
template=$scratch/template
cmake -S "$source_dir/plugins/template" -B "$template" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$scratch/template-configure.log" 2>&1 ||
  { cat "$scratch/template-configure.log"; fail "configuring plugins/template failed"; }
cmake --build "$template" >"$scratch/template-build.log" 2>&1 ||
  { cat "$scratch/template-build.log"; fail "building plugins/template failed"; }
cmake --install "$template" >/dev/null || fail "installing plugins/template failed"
expect_file "$plugin_dir/my_plugin.so" "template plugin installed by its cmake --install"
exported=$(nm -D --defined-only "$plugin_dir/my_plugin.so" | awk '$2 == "T" {print $3}')
[ "$exported" = "cairn_plugin_entry" ] ||
  fail "my_plugin.so exports functions other than cairn_plugin_entry: $exported"
listing=$("$prefix/bin/cairn" plugins --config "$config" --json) ||
  fail "cairn plugins does not load the template plugin"
expect_contains "$listing" '"name":"my_plugin"' "cairn plugins --json after installing the template"
expect_contains "$listing" '"steps":["my_plugin_greet","my_plugin_finish"]' \
  "cairn plugins --json after installing the template"

# The same plugin compiled with nothing but the flags of cairn.pc.
note "compiling plugins/template with pkg-config --cflags cairn"
mkdir -p "$scratch/pc-plugins"
cflags=$(PKG_CONFIG_PATH=$prefix/share/pkgconfig pkg-config --cflags cairn) ||
  fail "pkg-config cairn failed"
expect_contains "$cflags" "-I$prefix/include" "pkg-config --cflags cairn"
# shellcheck disable=SC2086 # cflags is a list of flags
c++ -std=c++17 -O1 -shared -fPIC -fvisibility=hidden -Wl,--no-undefined $cflags \
  "$source_dir/plugins/template/my_plugin.cpp" -o "$scratch/pc-plugins/my_plugin.so" ||
  fail "compiling with pkg-config's flags failed"
printf 'plugins:\n  directories: [%s]\n' "$scratch/pc-plugins" >"$scratch/pc.yaml"
listing=$("$prefix/bin/cairn" plugins --config "$scratch/pc.yaml") ||
  fail "cairn plugins does not load the plugin built with pkg-config"
expect_contains "$listing" "my_plugin_greet" "cairn plugins with the pkg-config-built plugin"

# A second install keeps the configuration an operator edited.
echo "# edited by the operator" >>"$config"
cmake --install "$build_dir" --prefix "$prefix" >"$scratch/reinstall.log" ||
  fail "the second cmake --install failed"
grep -q "edited by the operator" "$config" || fail "re-installing overwrote $config"
expect_contains "$(cat "$scratch/reinstall.log")" "Keeping: $config" "the second install's log"

note "passed"
