#!/usr/bin/env bash
# The Dockerfile, checked without a Docker engine (none runs where the suite
# runs, so the image itself is not built here): every path it COPYs from the
# context exists and is not excluded by .dockerignore; .dockerignore keeps a
# checkout's build/, build-*/, .data/ and .git/ out of the context (and with
# them a CMakeCache.txt that would break the image's `cmake -B build`) but no
# tracked file; the package it installs is the one CPack names; it sets
# CAIRN_METRICS_LISTEN and CAIRN_HEALTH_LISTEN so that, read by the built
# cairn, metrics and health both listen on every interface without two
# servers fighting over one port, and EXPOSEs it;
# and its HEALTHCHECK command, run as Docker runs it (/bin/sh -c), succeeds
# exactly when GET /readyz on that address answers 200.
source "$(dirname "$0")/lib.sh"

dockerfile=$source_dir/Dockerfile
ignore_file=$source_dir/.dockerignore
expect_file "$dockerfile" "Dockerfile"
expect_file "$ignore_file" ".dockerignore"

# The Dockerfile's instructions, one per line: continuation lines joined,
# comments dropped, as Docker reads them.
instructions=$(sed '/^[[:space:]]*#/d' "$dockerfile" |
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | sed '/^[[:space:]]*$/d')
instruction() {  # instruction KEYWORD: the arguments of each KEYWORD instruction
  sed -n "s/^[[:space:]]*$1[[:space:]]\{1,\}//Ip" <<<"$instructions"
}

# .dockerignore as Docker applies it (moby/patternmatcher): patterns are
# relative to the context, cleaned of leading and trailing slashes; "*" and
# "?" stay within one path element, "**" spans any; a path is excluded when
# it or one of its parent folders matches; a later "!pattern" re-includes.
patterns=()
while IFS= read -r line || [ -n "$line" ]; do
  line=$(sed 's/^[[:space:]]*//; s/[[:space:]]*$//' <<<"$line")
  [ -z "$line" ] || [ "${line:0:1}" = "#" ] && continue
  patterns+=("$line")
done <"$ignore_file"

pattern_regex() {  # pattern_regex PATTERN: an anchored ERE for it
  local p=$1 out="" c i
  p=${p#/}
  p=${p%/}
  for ((i = 0; i < ${#p}; i++)); do
    c=${p:i:1}
    if [ "$c" = "*" ] && [ "${p:i+1:1}" = "*" ]; then
      if [ "${p:i+2:1}" = "/" ]; then out+="(.*/)?"; i=$((i + 2)); else out+=".*"; i=$((i + 1)); fi
    elif [ "$c" = "*" ]; then out+="[^/]*"
    elif [ "$c" = "?" ]; then out+="[^/]"
    elif [[ $c =~ [.+^$(){}|\\] ]]; then out+="\\$c"
    else out+="$c"
    fi
  done
  printf '^%s$' "$out"
}

ignored() {  # ignored PATH: whether the context leaves PATH out
  local path=$1 excluded=1 pattern negate regex prefix
  for pattern in "${patterns[@]}"; do
    negate=0
    if [ "${pattern:0:1}" = "!" ]; then negate=1; pattern=${pattern:1}; fi
    regex=$(pattern_regex "$pattern")
    prefix=$path
    while :; do
      if [[ $prefix =~ $regex ]]; then
        if [ $negate = 1 ]; then excluded=1; else excluded=0; fi
        break
      fi
      [[ $prefix == */* ]] || break
      prefix=${prefix%/*}
    done
  done
  return $excluded
}

# The matcher itself, on cases whose answer Docker documents.
ignored "build/CMakeCache.txt" || fail "build/ is not excluded"
ignored "build-asan/CMakeCache.txt" || fail "build-*/ is not excluded"
ignored ".data/postgres/PG_VERSION" || fail ".data/ is not excluded"
ignored ".git/HEAD" || fail ".git/ is not excluded"
! ignored "core/build/x.cpp" || fail "a nested build folder is excluded (patterns are anchored)"
! ignored "builder.txt" || fail "builder.txt is excluded"

# Nothing the build needs is left out: no tracked file is excluded.
if git -C "$source_dir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r tracked; do
    ! ignored "$tracked" || fail ".dockerignore excludes the tracked file $tracked"
  done < <(git -C "$source_dir" ls-files)
else
  note "not a git checkout: skipping the tracked-files check"
fi

# COPY sources from the context exist and are in it.
copies=0
while read -r args; do
  [[ $args == --from=* ]] && continue
  read -r -a words <<<"$args"
  for source in "${words[@]:0:${#words[@]}-1}"; do
    [[ $source == --* ]] && continue
    [ -e "$source_dir/$source" ] || fail "COPY $source: no such path in the checkout"
    if [ "$source" != . ]; then
      ! ignored "${source#./}" || fail "COPY $source: excluded by .dockerignore"
    fi
    copies=$((copies + 1))
  done
done < <(instruction COPY)
[ "$copies" -ge 2 ] || fail "found $copies COPY sources, expected the script and the checkout"

# The image's build folder is excluded, so no host CMakeCache.txt reaches it.
build_folder=$(instruction RUN | sed -n 's/.*cmake -S [^ ]* -B \([^ ]*\).*/\1/p' | head -n1)
[ -n "$build_folder" ] || fail "no RUN cmake -S . -B <folder> in the Dockerfile"
ignored "$build_folder/CMakeCache.txt" || fail "the image's build folder $build_folder is not excluded"

# The runtime stage installs the package CPack makes (cairn_<version>_<arch>.deb).
version=$("$build_dir/daemon/cairn" --version | awk '{print $2}')
package_glob=$(instruction COPY | sed -n 's/^--from=[^ ]* [^ ]*\/\(cairn[^ /]*\.deb\) .*/\1/p')
[ -n "$package_glob" ] || fail "no COPY --from=... of the cairn package"
# shellcheck disable=SC2053 # the glob is meant to match
[[ "cairn_${version}_$(dpkg --print-architecture).deb" == $package_glob ]] ||
  fail "COPY $package_glob does not match the package CPack names"
# shellcheck disable=SC2053
[[ "cairn-dev_${version}_all.deb" != $package_glob ]] || fail "COPY $package_glob takes cairn-dev too"

# The account runs the daemon, as in the package.
user=$(instruction USER)
grep -qE "^u $user " "$source_dir/systemd/cairn.sysusers" || fail "USER $user is not the package's"

# Metrics: the address from the environment, its port exposed, and the
# built cairn reading the variable.
listen=$(instruction ENV | sed -n 's/^CAIRN_METRICS_LISTEN=\([^ ]*\).*/\1/p')
[ -n "$listen" ] || fail "no ENV CAIRN_METRICS_LISTEN="
[[ $listen == 0.0.0.0:* ]] || fail "CAIRN_METRICS_LISTEN=$listen does not listen on every interface"
port=${listen##*:}
instruction EXPOSE | tr ' ' '\n' | grep -qx "$port\(/tcp\)\?" || fail "EXPOSE does not name $port"
printf 'plugins:\n  directories: []\n' >"$scratch/cairn.yaml"
CAIRN_METRICS_LISTEN=$listen "$build_dir/daemon/cairn" plugins --config "$scratch/cairn.yaml" \
  >/dev/null 2>&1 || fail "cairn refuses CAIRN_METRICS_LISTEN=$listen"
if err=$(CAIRN_METRICS_LISTEN=no-port "$build_dir/daemon/cairn" plugins \
  --config "$scratch/cairn.yaml" 2>&1); then
  fail "cairn ignores CAIRN_METRICS_LISTEN (accepted no-port)"
fi
expect_contains "$err" "CAIRN_METRICS_LISTEN" "cairn's error for a bad CAIRN_METRICS_LISTEN"
# Health as the image's environment configures it: on every interface, and
# on the metrics address itself (one server) or on a port of its own.
image_env=()
for assignment in $(instruction ENV); do image_env+=("$assignment"); done
shown=$(env "${image_env[@]}" "$build_dir/daemon/cairn" config show --config "$scratch/cairn.yaml") ||
  fail "cairn config show refuses the image's environment"
health=$(awk '$1 == "health.listen" { print $2 }' <<<"$shown")
metrics=$(awk '$1 == "metrics.listen" { print $2 }' <<<"$shown")
[[ $health == 0.0.0.0:* ]] || fail "health.listen is $health in the image: /readyz unreachable, or its port taken by metrics"
[[ $health == "$metrics" || ${health##*:} != "${metrics##*:}" ]] ||
  fail "health.listen $health and metrics.listen $metrics want the same port from two servers"

# The HEALTHCHECK, against a one-request HTTP server on a free port that
# answers 200 on one path and 404 on others (or a fixed status).
healthcheck=$(instruction HEALTHCHECK)
[ -n "$healthcheck" ] || fail "no HEALTHCHECK"
command=$(sed 's/^\(--[a-z-]*=[^ ]*[[:space:]]*\)*//' <<<"$healthcheck")
[[ $command == CMD\ * ]] || fail "HEALTHCHECK is not CMD ...: $healthcheck"
command=${command#CMD }
[[ $command != \[* ]] || fail "HEALTHCHECK uses the exec form; this test runs the shell form"
expect_contains "$command" "/readyz" "HEALTHCHECK"

serve_once() {  # serve_once PATH STATUS: answers STATUS on PATH, 404 elsewhere
  perl -MIO::Socket::INET -e '
    my ($path, $status, $portfile) = @ARGV;
    my $server = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
                                       Listen => 1, ReuseAddr => 1) or die "listen: $!";
    open(my $f, ">", $portfile) or die; print $f $server->sockport, "\n"; close $f;
    local $SIG{ALRM} = sub { exit 0 }; alarm 15;
    my $client = $server->accept or exit 0;
    my $line = <$client>;
    my ($target) = $line =~ m{^GET (\S+) HTTP/1\.[01]};
    my $code = (defined $target && $target eq $path) ? $status : 404;
    while (my $h = <$client>) { last if $h =~ /^\r?\n$/ }
    print $client "HTTP/1.1 $code X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    close $client;' "$1" "$2" "$scratch/port" &
  server=$!
  for _ in $(seq 100); do [ -s "$scratch/port" ] && break; sleep 0.05; done
  [ -s "$scratch/port" ] || fail "the test HTTP server did not start"
  server_port=$(cat "$scratch/port")
  rm -f "$scratch/port"
}

run_healthcheck() {  # run_healthcheck PORT: the command's exit status
  local status=0
  CAIRN_HEALTH_LISTEN=0.0.0.0:$1 timeout 10 /bin/sh -c "$command" >/dev/null 2>&1 || status=$?
  return $status
}

serve_once /readyz 200
run_healthcheck "$server_port" || fail "HEALTHCHECK failed although /readyz answered 200"
wait "$server"
serve_once /readyz 503
! run_healthcheck "$server_port" || fail "HEALTHCHECK passed although /readyz answered 503"
wait "$server"
serve_once /healthz 200
! run_healthcheck "$server_port" || fail "HEALTHCHECK passed on a server without /readyz"
wait "$server"
# Nothing listens on a port the last server just gave up.
! run_healthcheck "$server_port" || fail "HEALTHCHECK passed with nothing listening"

note "passed (static checks only: no Docker engine builds the image here)"
