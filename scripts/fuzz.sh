#!/usr/bin/env bash
# Run the request-decode fuzz target for N seconds (default 60).
# Installs a nightly toolchain and cargo-fuzz when missing.
set -euo pipefail
run_secs="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# FUZZ_DEV=1 builds without optimisations (much cheaper to compile on a small machine,
# slower to fuzz).
dev_flag=()
if [ -n "${FUZZ_DEV:-}" ]; then dev_flag=(--dev); fi

# New inputs go to a scratch corpus (ignored by git); the committed seeds are read-only.
mkdir -p fuzz/corpus-work/request_decode
exec cargo +nightly fuzz run "${dev_flag[@]}" request_decode \
    fuzz/corpus-work/request_decode fuzz/corpus/request_decode \
    -- -max_total_time="$run_secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10
