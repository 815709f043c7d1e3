#!/bin/sh
# 10,000 half-open SMB-over-QUIC handshakes (issue 32) against a debug build,
# while smbclient (TCP) and a QUIC client (a full handshake) keep working; prints the
# flood's time and the server's RSS before and after. CI runs the same test
# with 400 (cargo test -p ringshare --test quic).
#   scripts/quic-flood.sh [N]
set -eu
cd "$(dirname "$0")/.."
QUIC_FLOOD="${1:-10000}" exec cargo test -p ringshare --test quic \
    a_flood_of_half_open_handshakes_leaves_tcp_and_quic_clients_served -- --nocapture
