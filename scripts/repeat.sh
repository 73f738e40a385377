#!/usr/bin/env bash
# Runs the tests a filter names N times in a row and stops at the first failing run, to show
# that a test does not fail sometimes (not part of CI).
# Usage: ./scripts/repeat.sh N NEXTEST-FILTER... (e.g. ./scripts/repeat.sh 50 -p backflow --test e2e drivers::)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="$1"
shift
cargo nextest run --no-run "$@"
for i in $(seq 1 "$runs"); do
    if ! cargo nextest run --no-fail-fast "$@" >"${CARGO_TARGET_DIR:-target}/repeat-last.log" 2>&1; then
        echo "run $i of $runs failed; its output is in ${CARGO_TARGET_DIR:-target}/repeat-last.log" >&2
        grep -E '^\s+(FAIL|FLAKY)' "${CARGO_TARGET_DIR:-target}/repeat-last.log" >&2 || true
        exit 1
    fi
    echo "run $i of $runs passed"
done
