#!/usr/bin/env bash
# The fuzz campaign: libFuzzer (cargo-fuzz) over the targets in fuzz/fuzz_targets/, whose
# bodies and invariants are `shardlog::fuzzing` (the same code `cargo test` runs as the
# CI smoke over the corpus and seeded inputs: src/fuzzing/smoke_tests.rs).
#
#   scripts/fuzz.sh [TARGET...]              every target (default) for FUZZ_SECS each (60)
#   FUZZ_RUNS=10000000 scripts/fuzz.sh ...   a fixed number of executions per target instead
#   FUZZ_DEV=1                               unoptimised build (cheaper to compile, slower)
#   FUZZ_TIMEOUT=30                          libFuzzer's per-input timeout in s (10; raise it on a loaded machine)
#
# Installs a nightly toolchain and cargo-fuzz when missing (needs static.rust-lang.org).
# New inputs go to fuzz/corpus-work/<target> (ignored by git); the committed corpus in
# fuzz/corpus/<target> is read only (add a finding's reproducer there by hand). Each
# target's executions, coverage and corpus size are printed at the end; libFuzzer's whole
# output is kept in fuzz/corpus-work/<target>.log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

dev_flag=()
if [ -n "${FUZZ_DEV:-}" ]; then dev_flag=(--dev); fi
if [ -n "${FUZZ_RUNS:-}" ]; then budget=(-runs="$FUZZ_RUNS"); else budget=(-max_total_time="${FUZZ_SECS:-60}"); fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

summary=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus-work/$t" "fuzz/corpus/$t"
    log="fuzz/corpus-work/$t.log"
    per_target=()
    if [ "$t" = segment_recovery ]; then
        # Its recovery runs on a glommio worker thread that keeps its executor between
        # inputs, so libFuzzer's per-input leak check (malloc and free counts differ on
        # every input) ran LeakSanitizer's full scan each time: 43 % of the run, at 220
        # executions/s; without it 770/s. Its files go to tmpfs when there is one.
        per_target=(-detect_leaks=0)
        if [ -z "${TMPDIR:-}" ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
    fi
    echo "== fuzz $t (${budget[*]} ${per_target[*]})"
    set +e
    (cd fuzz && cargo +nightly fuzz run "${dev_flag[@]}" "$t" \
        "corpus-work/$t" "corpus/$t" \
        -- "${budget[@]}" "${per_target[@]}" -max_len=65536 -rss_limit_mb=2048 \
        -timeout="${FUZZ_TIMEOUT:-10}" -print_final_stats=1) > "$log" 2>&1
    status=$?
    set -e
    if [ "$status" -ne 0 ] || grep -q "ERROR: libFuzzer\|panicked at" "$log"; then
        grep -E "panicked at|ERROR|SUMMARY|Test unit written" "$log" | head -20
        echo "fuzz $t FAILED (exit $status): see $log (the crashing input is in fuzz/artifacts/$t/)"
        exit 1
    fi
    runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
    cov=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]*' | tail -1)
    corpus=$(grep -E '^#[0-9]+' "$log" | grep -o 'corp: [0-9]*' | tail -1)
    summary+=("$t: $runs executions, $cov, $corpus inputs, $(grep -E '^stat::peak_rss_mb' "$log" | awk '{print $2}') MiB peak")
    echo "${summary[-1]}"
done
printf '%s\n' "${summary[@]}"
