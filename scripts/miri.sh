#!/usr/bin/env bash
# Miri (issue 28 point 6) over the unit tests of the custom primitives shardlog builds its
# hot path and its cross-thread hand-offs from: undefined behaviour, use after free, data
# races and leaks in their unsafe code are reported (Miri interprets the tests; it cannot
# run glommio's executor, which needs io_uring, so what needs one is not here):
#   storage::write_slots     the writer's pinned write-future slots (Pin::new_unchecked)
#   storage::durable_waiters the append waiters' slab (futures answered, dropped, reused)
#   controller::shard_updates::tests::a_poster_and_a_taker_on_two_threads_agree
#                            the controller -> shard metadata channel, on two threads
# The vendored glommio patch (a task's last waker dropped on a foreign thread) runs under
# glommio, so it is checked by its stress test instead: tests/glommio_foreign_waker.rs
# (cargo test, in CI).
#
#   scripts/miri.sh                  those tests
#   scripts/miri.sh storage::        any other test filter
#   MIRIFLAGS=...                    Miri's own flags (default: -Zmiri-strict-provenance)
#
# Installs the nightly toolchain and its miri component when missing (static.rust-lang.org).
# The first run builds every dependency for Miri (about 12 minutes on 2 cores); later runs
# a minute or two. Not in CI: a campaign step, like scripts/fuzz.sh and scripts/chaos.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^miri'; then
  rustup +nightly component add miri
fi

filters=("$@")
if [ ${#filters[@]} -eq 0 ]; then
  filters=(storage::write_slots storage::durable_waiters controller::shard_updates::tests::a_poster_and_a_taker_on_two_threads_agree)
fi
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
echo "miri.sh: cargo +nightly miri test --lib -- ${filters[*]} (MIRIFLAGS=$MIRIFLAGS)"
cargo +nightly miri test --lib -- "${filters[@]}"
