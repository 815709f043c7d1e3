#!/usr/bin/env bash
# Run the cargo-fuzz targets in fuzz/ for a bounded time each (docs/fuzzing.md).
#
#   scripts/fuzz.sh            every target, FUZZ_SECONDS each (default 15; 7 with CI=true)
#   scripts/fuzz.sh TARGET...  only these targets
#   scripts/fuzz.sh --list     list the targets
#
# Environment: FUZZ_SECONDS (per target), FUZZ_RSS_MB (default 1024), FUZZ_JOBS (targets
# fuzzed at once, default one per CPU: each fuzzer is one thread), FUZZ_SANITIZER (address, or
# none: the default with CI=true, where the build must fit the CI budget; the Rust crates forbid
# unsafe code, so the sanitizer mostly instruments dependencies). On a CI machine (CI=true) the
# nightly toolchain and cargo-fuzz are installed when missing. New inputs the fuzzer finds go to
# fuzz/target/work-corpus/, never into the committed fuzz/corpus/.
# Exits non-zero when any target crashes, after printing the artifact path.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

rss_mb="${FUZZ_RSS_MB:-1024}"
# CI budget on 2 cores: about 3 min to build the fuzz crate from scratch (aws-lc's C code
# included), then 21 targets x 7 s, one per CPU at a time (docs/testing.md has the CI's phases).
if [ "${CI:-}" = "true" ]; then
    seconds="${FUZZ_SECONDS:-7}"
    sanitizer="${FUZZ_SANITIZER:-none}"
else
    seconds="${FUZZ_SECONDS:-15}"
    sanitizer="${FUZZ_SANITIZER:-address}"
fi

targets() {
    sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^ringshare-fuzz$'
}

if [ "${1:-}" = "--list" ]; then
    targets
    exit 0
fi
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi

if ! rustup toolchain list | grep -q '^nightly'; then
    if [ "${CI:-}" = "true" ]; then
        rustup toolchain install nightly --profile minimal
    else
        echo "fuzz.sh: the nightly toolchain is missing: rustup toolchain install nightly --profile minimal" >&2
        exit 2
    fi
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
        cargo install cargo-fuzz --locked
    else
        echo "fuzz.sh: cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
        exit 2
    fi
fi

if [ "$#" -gt 0 ]; then
    selected=("$@")
    for t in "${selected[@]}"; do
        if ! targets | grep -qx "$t"; then
            echo "fuzz.sh: no target '$t' (scripts/fuzz.sh --list)" >&2
            exit 2
        fi
    done
else
    mapfile -t selected < <(targets)
fi

# Build first (release with debug assertions): all targets at once, or the one
# asked for.
if [ "${#selected[@]}" -eq 1 ]; then
    cargo +nightly fuzz build -s "$sanitizer" "${selected[0]}"
else
    cargo +nightly fuzz build -s "$sanitizer"
fi

# One target: its summary, or its crash and how to reproduce it (and a mark in fuzz/target).
run_target() {
    local t=$1 work="fuzz/target/work-corpus/$1" artifacts="fuzz/artifacts/$1"
    local log="fuzz/target/fuzz-$1.log" found
    mkdir -p "$work" "$artifacts" "fuzz/corpus/$t"
    rm -f "fuzz/target/fuzz-$t.failed"
    if cargo +nightly fuzz run -s "$sanitizer" "$t" "$work" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb="$rss_mb" -timeout=10 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1; then
        echo "=== fuzz $t for ${seconds}s: $(grep -E '^(Done|stat::number_of_executed_units)' "$log" | tail -2 | tr '\n' ' ')"
    else
        touch "fuzz/target/fuzz-$t.failed"
        found=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        # One write, so that the other job's lines do not come in between.
        printf '%s\n' "=== fuzz $t for ${seconds}s" \
            "$(grep -A6 -E 'panicked at|ERROR: (AddressSanitizer|libFuzzer)' "$log" | head -30)" \
            "!!! fuzz target $t FAILED; artifact: ${found:-(none, see $log)}" \
            "    reproduce: cargo +nightly fuzz run -s $sanitizer $t ${found:-}"
    fi
}

# Each fuzzer is one thread: FUZZ_JOBS of them at once (default: one per CPU).
jobs="${FUZZ_JOBS:-$(nproc)}"
running=0
for t in "${selected[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    run_target "$t" &
    running=$((running + 1))
done
wait
failed=()
for t in "${selected[@]}"; do
    [ -e "fuzz/target/fuzz-$t.failed" ] && failed+=("$t")
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz.sh: crashes in: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: ${#selected[@]} target(s) ran ${seconds}s each without a crash"
