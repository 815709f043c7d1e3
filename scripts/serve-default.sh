#!/usr/bin/env bash
# Install what is needed, build, and serve ./data (created if missing) as share "data".
# Extra arguments go to `ringshare serve` (default: --listen 127.0.0.1:4450; give
# --listen 0.0.0.0:445 to serve the network on the standard port as root).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release -p ringshare
mkdir -p data
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--listen 127.0.0.1:4450)
exec target/release/ringshare serve ./data "${args[@]}"
