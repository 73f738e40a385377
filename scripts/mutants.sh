#!/usr/bin/env bash
# Mutation testing of the decision code, as the simulator's own test (not in CI: a full run
# takes hours on two cores). Needs `cargo install cargo-mutants`.
#
#   scripts/mutants.sh                 every mutant of the decision files
#   scripts/mutants.sh --shard 1/4     a quarter of them (any cargo-mutants flag passes through)
#   scripts/mutants.sh --report        the table of the last run again
#
# Pass 1 runs each mutant against the simulator alone (`backflow-sim`, seeds
# $BACKFLOW_SIM_SEEDS, 0..2000 unless set). Pass 2 runs the mutants it missed against the
# crates' own tests (`backflow-branch`, `backflow-decision`). Then it prints one line per
# mutant — caught by the simulator / by other tests / missed (timeouts count as caught,
# unviable mutants are left out) — and the totals. Output: target/mutants/{sim,tests}.
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=(
  crates/backflow-decision/src/core.rs
  crates/backflow-decision/src/apply_window.rs
  crates/backflow-decision/src/operation.rs
  crates/backflow-decision/src/reason.rs
  crates/backflow-decision/src/object_write.rs
  crates/backflow-decision/src/withheld.rs
  crates/backflow-decision/src/held_status.rs
  crates/backflow-decision/src/deferrals.rs
  crates/backflow-branch/src/worker.rs
  crates/backflow-branch/src/commit_window.rs
  crates/backflow-branch/src/backoff.rs
  crates/backflow-branch/src/merge.rs
)
file_args=()
for f in "${FILES[@]}"; do file_args+=(--file "$f"); done
export BACKFLOW_SIM_SEEDS="${BACKFLOW_SIM_SEEDS:-0..2000}"
out=target/mutants
mkdir -p "$out"

if [ "${1:-}" != --report ]; then
  # cargo-mutants exits non-zero when a mutant is missed: that is a result, not a failure.
  cargo mutants --no-shuffle -p backflow-decision -p backflow-branch "${file_args[@]}" \
    --test-package backflow-sim --output "$out/sim" "$@" || true
  sim="$out/sim/mutants.out"
  : > "$out/missed-by-sim.txt"
  [ -f "$sim/missed.txt" ] && cp "$sim/missed.txt" "$out/missed-by-sim.txt"

  # The same names `--list` shows, as exact regexes.
  re_args=()
  while IFS= read -r name; do
    [ -n "$name" ] || continue
    re_args+=(--re "^$(printf '%s' "$name" | sed 's/[][\.*^$(){}+?|/]/\\&/g')\$")
  done < "$out/missed-by-sim.txt"
  rm -rf "$out/tests"
  if [ "${#re_args[@]}" -gt 0 ]; then
    cargo mutants --no-shuffle -p backflow-decision -p backflow-branch "${file_args[@]}" \
      "${re_args[@]}" --test-package backflow-branch --test-package backflow-decision \
      --output "$out/tests" || true
  fi
fi
sim="$out/sim/mutants.out"
tests="$out/tests/mutants.out"

count() { if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi; }
by_sim=$(( $(count "$sim/caught.txt") + $(count "$sim/timeout.txt") ))
by_tests=$(( $(count "$tests/caught.txt") + $(count "$tests/timeout.txt") ))
missed=$(count "$tests/missed.txt")
unviable=$(count "$sim/unviable.txt")
viable=$(( by_sim + $(count "$out/missed-by-sim.txt") ))

for f in caught timeout; do [ -f "$sim/$f.txt" ] && sed 's/^/simulator  /' "$sim/$f.txt"; done
for f in caught timeout; do [ -f "$tests/$f.txt" ] && sed 's/^/tests      /' "$tests/$f.txt"; done
[ -f "$tests/missed.txt" ] && sed 's/^/MISSED     /' "$tests/missed.txt"
echo
# Per file, as docs/simulation.md shows it.
file_of() { [ -f "$1" ] && cut -d: -f1 "$1"; }
echo "| file | viable | simulator | other tests only | missed |"
echo "|---|---|---|---|---|"
for f in "${FILES[@]}"; do
  n_sim=$( { file_of "$sim/caught.txt"; file_of "$sim/timeout.txt"; } | grep -cx "$f" || true)
  n_tests=$( { file_of "$tests/caught.txt"; file_of "$tests/timeout.txt"; } | grep -cx "$f" || true)
  n_missed=$(file_of "$tests/missed.txt" | grep -cx "$f" || true)
  n_viable=$(( n_sim + $(file_of "$out/missed-by-sim.txt" | grep -cx "$f" || true) ))
  echo "| \`$f\` | $n_viable | $n_sim | $n_tests | $n_missed |"
done
echo
echo "viable mutants: $viable (unviable, left out: $unviable)"
echo "caught by the simulator: $by_sim"
echo "caught only by other tests: $by_tests"
echo "missed: $missed"
if [ "$viable" -gt 0 ]; then
  echo "simulator alone: $(( 100 * by_sim / viable )) %"
fi
