#!/usr/bin/env bash
# Runs every test of the workspace. Installs nothing system-wide that a test does not need.
# Usage: ./scripts/test.sh [extra nextest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

need() {
    command -v "$1" >/dev/null 2>&1 || { echo "error: '$1' is required by the tests but is not on PATH ($2)" >&2; exit 1; }
}
need git "the Git engine tests push to real repositories"
need kubectl "the API server is tested with real kubectl"

# Tests create commits; never depend on (or touch) the user's global Git identity.
export GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="backflow tests" GIT_AUTHOR_EMAIL="tests@backflow.invalid"
export GIT_COMMITTER_NAME="backflow tests" GIT_COMMITTER_EMAIL="tests@backflow.invalid"

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --all-targets --no-fail-fast "$@"
else
    cargo test --workspace --all-targets --no-fail-fast "$@"
fi
cargo test --workspace --doc
