#!/usr/bin/env bash
# Smoke-runs every fuzz target for SECONDS seconds each (default 10) and fails if any crashes.
#
#   scripts/fuzz-smoke.sh [SECONDS] [TARGET...]
#
# Needs the nightly toolchain (cargo +nightly); installs cargo-fuzz if it is missing. Each target
# fuzzes fuzz/corpus/<target> (gitignored), seeded from fuzz/seeds/<target> (committed, made by
# `cargo +nightly run --manifest-path fuzz/Cargo.toml --example gen_seeds`). Crashing inputs land
# in fuzz/artifacts/<target>/; reproduce one with
#   cargo +nightly fuzz run -O -a <target> fuzz/artifacts/<target>/crash-...
#
# FUZZ_SEED=N fixes libFuzzer's random seed so that a run explores the same inputs each time
# (the test suite sets it: a gate must not fail at random); unset, every run explores anew.
set -euo pipefail

cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-10}"
shift || true
case "$SECONDS_PER_TARGET" in
    ''|*[!0-9]*) echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2 ;;
esac

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz-smoke: the nightly toolchain is required (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# Release with debug assertions and overflow checks: an arithmetic overflow is a finding too.
BUILD_FLAGS=(-O -a)
SEED_ARGS=()
if [ -n "${FUZZ_SEED:-}" ]; then
    SEED_ARGS=(-seed="$FUZZ_SEED")
fi

cd fuzz
if [ "$#" -gt 0 ]; then
    TARGETS=("$@")
else
    mapfile -t TARGETS < <(cargo +nightly fuzz list)
fi

echo "fuzz-smoke: building ${#TARGETS[@]} targets"
cargo +nightly fuzz build "${BUILD_FLAGS[@]}"

failed=()
for t in "${TARGETS[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    if [ -d "seeds/$t" ]; then
        cp -n "seeds/$t"/* "corpus/$t"/ 2>/dev/null || true
    fi
    echo "fuzz-smoke: $t for ${SECONDS_PER_TARGET}s"
    # Not inside artifacts/$t: cargo-fuzz reports the newest file there as the crashing input.
    # FUZZ_LOG_NAME keeps a long run's log apart from a concurrent smoke run's (fuzz-release.sh).
    log="artifacts/$t.${FUZZ_LOG_NAME:-smoke}.log"
    if cargo +nightly fuzz run "${BUILD_FLAGS[@]}" "$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 "${SEED_ARGS[@]}" >"$log" 2>&1; then
        grep -E '^stat::number_of_executed_units' "$log" | sed "s/^/fuzz-smoke: $t: /" || true
    else
        echo "fuzz-smoke: $t FAILED; last lines of $log:" >&2
        grep -E -m1 -A12 "panicked at|ERROR: (AddressSanitizer|libFuzzer)" "$log" >&2 || tail -n 40 "$log" >&2
        grep -E -A2 "^(Failing input|Reproduce with):" "$log" | grep -E '^[[:space:]]+[^[:space:]]' >&2 || true
        failed+=("$t")
    fi
done

total=${#TARGETS[@]}
nfail=${#failed[@]}
echo "fuzz: $((total - nfail)) passed, $nfail failed"
if [ "$nfail" -ne 0 ]; then
    echo "fuzz-smoke: crashed: ${failed[*]} (inputs under fuzz/artifacts/<target>/)" >&2
    exit 1
fi
