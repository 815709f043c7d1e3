#!/usr/bin/env bash
# Run the cargo-fuzz targets in fuzz/ for a bounded time each (docs/fuzzing.md).
#
#   scripts/fuzz.sh            every target, FUZZ_SECONDS each (default 15; 10 with CI=true)
#   scripts/fuzz.sh TARGET...  only these targets
#   scripts/fuzz.sh --list     list the targets
#
# Environment: FUZZ_SECONDS (per target), FUZZ_RSS_MB (default 1024),
# FUZZ_SANITIZER (address, or none: the default with CI=true, where the build
# must fit the CI budget; the Rust crates forbid unsafe code, so the sanitizer
# mostly instruments dependencies). Targets run one at a time. On a CI machine (CI=true) the nightly
# toolchain and cargo-fuzz are installed when missing. New inputs the fuzzer
# finds go to fuzz/target/work-corpus/, never into the committed fuzz/corpus/.
# Exits non-zero when any target crashes, after printing the artifact path.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

rss_mb="${FUZZ_RSS_MB:-1024}"
# CI budget on 2 cores: ~4-6 min to build the fuzz crate from scratch (aws-lc's
# C code included), then 18 targets x 7 s (the whole CI run took 1442 s of its 25-minute
# budget from a clean clone with 10 s per target, 2026-11-28).
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
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
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

failed=()
for t in "${selected[@]}"; do
    work="fuzz/target/work-corpus/$t"
    artifacts="fuzz/artifacts/$t"
    mkdir -p "$work" "$artifacts" "fuzz/corpus/$t"
    echo "=== fuzz $t for ${seconds}s"
    log="fuzz/target/fuzz-$t.log"
    if cargo +nightly fuzz run -s "$sanitizer" "$t" "$work" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb="$rss_mb" -timeout=10 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1; then
        grep -E '^(Done|stat::number_of_executed_units)' "$log" | tail -2 || true
    else
        grep -A6 -E 'panicked at|ERROR: (AddressSanitizer|libFuzzer)' "$log" | head -30 || true
        found=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        echo "!!! fuzz target $t FAILED; artifact: ${found:-(none, see $log)}"
        echo "    reproduce: cargo +nightly fuzz run -s $sanitizer $t ${found:-}"
        failed+=("$t")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz.sh: crashes in: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: ${#selected[@]} target(s) ran ${seconds}s each without a crash"
