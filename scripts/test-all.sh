#!/usr/bin/env bash
# Everything CI runs: formatting, lints, unit and integration tests (the integration
# tests start the real server and drive it with Debian's smbclient).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
scripts/fuzz.sh
