#!/usr/bin/env bash
# The manual page cairn(1) the build generates (`cairn help --man`) is valid
# man(7): groff formats it without a warning (-ww), mandoc's linter finds
# nothing at warning level or above, and man(1) renders it.
source "$(dirname "$0")/lib.sh"

page=$build_dir/daemon/cairn.1
expect_file "$page" "manual page (built by the cairn_manual target)"
warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1) || fail "groff failed: $warnings"
[ -z "$warnings" ] || fail "groff warns: $warnings"
lint=$(mandoc -Tlint -W warning "$page" 2>&1) || fail "mandoc -Tlint: $lint"
rendered=$(MANWIDTH=80 man -l "$page" 2>&1) || fail "man -l failed: $rendered"
expect_contains "$rendered" "CAIRN(1)" "man -l cairn.1"
expect_contains "$rendered" "cairn show RUN [options]" "man -l cairn.1"
note "passed"
