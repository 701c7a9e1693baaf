#!/usr/bin/env bash
# Cluster mode on one machine: a JetStream nats-server, N queue workers and the gateway on :8080.
#   WORKERS=2 scripts/cluster-local.sh [extra worker flags...]     (Ctrl-C stops everything)
# NATS takes only clients that log in: SIE_NATS_USER / SIE_NATS_PASSWORD (default: user sie and a
# random password for this run), which the workers and the gateway read from the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
WORKERS=${WORKERS:-2}
NATS_PORT=${NATS_PORT:-4222}
export SIE_NATS_USER=${SIE_NATS_USER:-sie}
# a letter first: NATS reads an all-digit value from its environment as a number
export SIE_NATS_PASSWORD=${SIE_NATS_PASSWORD:-p$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}
STORE=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$STORE"' EXIT INT TERM
# the login is read from the environment ($SIE_NATS_USER in the file), so it is never written down
printf 'authorization { user: $SIE_NATS_USER, password: $SIE_NATS_PASSWORD }\n' > "$STORE/nats.conf"
"$BIN/nats-server" -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$STORE" -c "$STORE/nats.conf" & pids+=($!)
sleep 1
for i in $(seq 1 "$WORKERS"); do
  "$BIN/sie-server" serve --port $((8100 + i)) --queue "nats://127.0.0.1:$NATS_PORT" --pool default "$@" & pids+=($!)
done
"$BIN/sie-server" gateway --nats "nats://127.0.0.1:$NATS_PORT" --port 8080 & pids+=($!)
wait
