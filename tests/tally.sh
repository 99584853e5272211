# The harness's tally, shared by tests/run.sh and tests/under-load.sh (sourced): steps that say
# when they began, and the count of what passed and failed, which the caller starts at
# `passed=0 failed=0`.

# Each step says when it began, so a slow run shows where its time went.
step() { printf '\n=== %s  (%s)\n' "$*" "$(date +%T)"; }

count() { # count <passed> <failed> <what>
    passed=$((passed + $1)) failed=$((failed + $2))
    printf -- '--- %s: %d passed, %d failed\n' "$3" "$1" "$2"
}

# Sums libtest's "test result:" lines of a log into "passed failed".
libtest_totals() {
    awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1) } }
         END { printf "%d %d\n", p, f }' "$1"
}
