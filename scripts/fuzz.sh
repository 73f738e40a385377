#!/usr/bin/env bash
# Fuzzes with cargo-fuzz (libFuzzer + AddressSanitizer). Targets: the SOPS codec, in
# crates/backflow-sops/fuzz/fuzz_targets: `decode` (any input gives a value or an error, never a
# panic) and `roundtrip` (any document encrypts, decrypts back to itself, and re-encrypts to the
# same file); the API server, in crates/backflow-server/fuzz/fuzz_targets: `request` (any HTTP
# request, its method, path, query, content type and body drawn from the input, is answered,
# never with a panic or a 500).
#
# Usage: ./scripts/fuzz.sh [SECONDS]   explore each target for SECONDS (default 60); new inputs are
#                                      kept in target/fuzz/corpus/TARGET for the next run
#        ./scripts/fuzz.sh --check     replay the checked-in seeds, then a fixed-seed exploration of
#                                      a fixed number of runs per target: the same inputs every
#                                      time, so it can gate CI (scripts/test.sh runs it)
#
# A crash is written to target/fuzz/artifacts/TARGET/; replay it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET FILE   (from the target's crate's fuzz/ folder)
# and keep it as a regression test (the SOPS codec's in
# crates/backflow-sops/tests/backflow_sops/decoder_noise.rs, the server's in its tests/api/).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

mode="explore"
seconds=60
case "${1:-}" in
    --check) mode="check" ;;
    "") ;;
    *[!0-9]*) echo "usage: $0 [SECONDS | --check]" >&2; exit 2 ;;
    *) seconds="$1" ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install --locked -q cargo-fuzz \
        || { echo "error: could not install cargo-fuzz: run 'cargo install cargo-fuzz'" >&2; exit 1; }
fi

# libFuzzer's sanitizer flags are unstable (-Z) options; RUSTC_BOOTSTRAP lets the one stable
# toolchain accept them instead of requiring a nightly one.
export RUSTC_BOOTSTRAP=1
# One target root for the repository; the fuzz build has its own flags, hence its own subfolder.
export CARGO_TARGET_DIR="$root/target/fuzz/build"
# Runs per target in --check mode: about 20 s each here (a round trip wraps a data key with age;
# a request that writes commits to the store).
declare -A check_runs=([decode]=20000 [roundtrip]=5000 [request]=40000)
declare -A crate_of=([decode]=backflow-sops [roundtrip]=backflow-sops [request]=backflow-server)

for target in decode roundtrip request; do
    cd "$root/crates/${crate_of[$target]}/fuzz"
    artifacts="$root/target/fuzz/artifacts/$target"
    mkdir -p "$artifacts"
    seeds="corpus/$target"
    mkdir -p "$seeds"
    if [ "$mode" = check ]; then
        # A scratch corpus: libFuzzer adds what it finds to its first corpus folder.
        corpus="$(mktemp -d)"
        cp -r "$seeds/." "$corpus/"
        cargo fuzz run "$target" -O "$corpus" -- \
            -seed=1 -runs="${check_runs[$target]}" -max_len=8192 -rss_limit_mb=2048 \
            -artifact_prefix="$artifacts/" -print_final_stats=1
        rm -rf "$corpus"
    else
        corpus="$root/target/fuzz/corpus/$target"
        mkdir -p "$corpus"
        cargo fuzz run "$target" -O "$corpus" "$seeds" -- \
            -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 \
            -artifact_prefix="$artifacts/" -print_final_stats=1
    fi
done
