#!/usr/bin/env bash
# Cluster mode on one machine: a JetStream nats-server, N queue workers and the gateway on :8080.
#   WORKERS=2 scripts/cluster-local.sh [extra worker flags...]     (Ctrl-C stops everything)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
WORKERS=${WORKERS:-2}
NATS_PORT=${NATS_PORT:-4222}
STORE=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$STORE"' EXIT INT TERM
"$BIN/nats-server" -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$STORE" & pids+=($!)
sleep 1
for i in $(seq 1 "$WORKERS"); do
  "$BIN/sie-server" serve --port $((8100 + i)) --queue "nats://127.0.0.1:$NATS_PORT" --pool default "$@" & pids+=($!)
done
"$BIN/sie-server" gateway --nats "nats://127.0.0.1:$NATS_PORT" --port 8080 & pids+=($!)
wait
