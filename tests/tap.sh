# SPDX-License-Identifier: GPL-2.0
#
# The TAP helpers of the shell test suites (tests/packaging.sh, tests/image.sh,
# tests/manifests.sh); sourced, never run. The suite sets $tmp, its scratch directory, first.

number=0
failures=0

# check <description> <command...>: one test, "ok N - ..." or "not ok N - ..."; the
# command's output is shown when it fails, and only its "RESULT ..." lines when it passes.
check() {
    local description="$1" log="$tmp/check.log"
    shift
    number=$((number + 1))
    if "$@" >"$log" 2>&1; then
        echo "ok $number - $description"
        grep '^RESULT' "$log" | sed 's/^/#   /'
    else
        echo "not ok $number - $description"
        sed 's/^/#   /' "$log"
        failures=$((failures + 1))
    fi
}

# fail <message>: says why a test fails, and fails.
fail() {
    echo "$*"
    return 1
}

# rst_is_valid <file>: docutils reads the reStructuredText without a warning.
rst_is_valid() {
    local python
    # The first Python that has docutils (python3-docutils serves the system one).
    for python in python3 /usr/bin/python3 ""; do
        [ -n "$python" ] || fail "no python3 with docutils" || return 1
        "$python" -c "import docutils" 2>/dev/null && break
    done
    "$python" - "$1" <<'PY'
import sys
import docutils.core
docutils.core.publish_doctree(
    open(sys.argv[1], encoding="utf-8").read(),
    source_path=sys.argv[1],
    settings_overrides={"report_level": 2, "halt_level": 2},
)
PY
}
