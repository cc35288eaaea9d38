#!/usr/bin/env bash
# Long fuzz run before a release: every target (or the ones named) for FUZZ_SECONDS each
# (default 600), one target at a time, random libFuzzer seeds. NOT part of CI: scripts/test.sh
# runs only the fixed-seed 5 s smoke (scripts/fuzz-smoke.sh); this takes ~10 min per target.
#
#   scripts/fuzz-release.sh [TARGET...]
#   FUZZ_SECONDS=1200 scripts/fuzz-release.sh engine rpc
#   FUZZ_SEED=N FUZZ_LOG_NAME=release scripts/fuzz-smoke.sh 600 <target>   # rerun with a row's seed
#
# Each target is run by scripts/fuzz-smoke.sh (same build flags, corpus and artifact layout) as a
# single libFuzzer process (the machine is shared, so no -jobs/-workers), logging to
# fuzz/artifacts/<target>.release.log. The per-target summary
# (seconds, executions, corpus size, crashes, libFuzzer seed) goes to stdout and to
# fuzz/release-run.txt (gitignored), rewritten after every target so an interrupted run still
# leaves one. Copy the table into docs/fuzzing-runs.md when the run is the release's record.
# Exits non-zero if any target crashed; its input is under fuzz/artifacts/<target>/ (fuzz/README.md
# says what to do with it).
set -uo pipefail

cd "$(dirname "$0")/.."
FUZZ_SECONDS="${FUZZ_SECONDS:-600}"
case "$FUZZ_SECONDS" in
    ''|*[!0-9]*) echo "fuzz-release: FUZZ_SECONDS must be a number of seconds" >&2; exit 2 ;;
esac
if [ "$FUZZ_SECONDS" -lt 600 ]; then
    echo "fuzz-release: warning: FUZZ_SECONDS=$FUZZ_SECONDS is under 600; not a release run" >&2
fi

if [ "$#" -gt 0 ]; then
    TARGETS=("$@")
else
    if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
        echo "fuzz-release: installing cargo-fuzz"
        cargo install cargo-fuzz --locked
    fi
    mapfile -t TARGETS < <(cd fuzz && cargo +nightly fuzz list)
fi
if [ "${#TARGETS[@]}" -eq 0 ]; then
    echo "fuzz-release: no targets (is cargo-fuzz installed?)" >&2
    exit 1
fi

OUT=fuzz/release-run.txt
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD 2>/dev/null || commit="$commit (+ uncommitted changes)"
header=(
    "# smbq fuzz release run"
    "date:      $(date -u +%Y-%m-%dT%H:%MZ)"
    "commit:    $commit"
    "toolchain: $(rustc +nightly --version 2>/dev/null); $(cargo +nightly fuzz --version 2>/dev/null)"
    "per target: ${FUZZ_SECONDS}s asked, 1 process, random seed, build -O -a"
    ""
    "| target | seconds | executions | corpus (new) | crashes | seed |"
    "|---|---:|---:|---:|---:|---:|"
)
rows=()
failed=()

count_files() { find "$1" -maxdepth 1 -type f 2>/dev/null | wc -l; }

write_summary() {
    { printf '%s\n' "${header[@]}"; printf '%s\n' "${rows[@]}"; [ -n "${1:-}" ] && printf '\n%s\n' "$1"; } >"$OUT"
}

total_execs=0
for t in "${TARGETS[@]}"; do
    corpus_before=$(count_files "fuzz/corpus/$t")
    if [ -d "fuzz/seeds/$t" ] && [ "$corpus_before" -eq 0 ]; then
        # The smoke script copies the seeds in; count them as the starting corpus.
        corpus_before=$(count_files "fuzz/seeds/$t")
    fi
    artifacts_before=$(count_files "fuzz/artifacts/$t")
    echo "fuzz-release: $t for ${FUZZ_SECONDS}s (started $(date -u +%H:%M:%SZ))"
    start=$(date +%s)
    # A fresh random libFuzzer seed per target, chosen here so that the summary records it.
    seed=$(( $(od -An -N4 -tu4 /dev/urandom) % 4294967295 + 1 ))
    FUZZ_SEED=$seed FUZZ_LOG_NAME=release scripts/fuzz-smoke.sh "$FUZZ_SECONDS" "$t"
    rc=$?
    elapsed=$(( $(date +%s) - start ))
    log="fuzz/artifacts/$t.release.log"
    execs=$(grep -aE '^stat::number_of_executed_units' "$log" 2>/dev/null | awk '{print $2}' | tail -n1)
    if [ -z "$execs" ]; then
        # After a crash libFuzzer prints no final stats; take the last status line.
        execs=$(grep -aoE '^#[0-9]+' "$log" 2>/dev/null | tail -n1 | tr -d '#')
    fi
    execs=${execs:-0}
    # Fuzzing time as libFuzzer reports it (the build is not counted); wall time after a crash.
    fuzzed=$(grep -aoE '^Done [0-9]+ runs in [0-9]+ second' "$log" 2>/dev/null | awk '{print $5}' | tail -n1)
    corpus_after=$(count_files "fuzz/corpus/$t")
    crashes=$(( $(count_files "fuzz/artifacts/$t") - artifacts_before ))
    if [ "$rc" -ne 0 ]; then
        failed+=("$t")
        [ "$crashes" -lt 1 ] && crashes="1?"
    fi
    total_execs=$(( total_execs + execs ))
    rows+=("| $t | ${fuzzed:-$elapsed} | $execs | $corpus_after (+$(( corpus_after - corpus_before ))) | $crashes | $seed |")
    echo "fuzz-release: ${rows[-1]}"
    write_summary
done

footer="total executions: $total_execs; crashed: ${failed[*]:-none}"
write_summary "$footer"
echo
cat "$OUT"
if [ "${#failed[@]}" -ne 0 ]; then
    echo "fuzz-release: crashed: ${failed[*]} (inputs under fuzz/artifacts/<target>/)" >&2
    exit 1
fi
