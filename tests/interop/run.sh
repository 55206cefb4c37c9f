#!/usr/bin/env bash
# Interop tests: unmodified Kafka clients against `tidelog serve`.
#
# Needs (installed by .ci/run, never by this script):
#   apt:  kcat python3 python3-venv openssl
#   pip (in a virtualenv): kafka-python confluent-kafka
#   npm:  kafkajs (in KAFKAJS_MODULES), with node
#
# Environment:
#   TIDELOG_BIN  the tidelog binary built with --features cli,server
#                (default: target/debug/tidelog)
#   PYTHON       python with kafka-python and confluent-kafka (default: python3)
#   KCAT         kcat binary (default: kcat)
#   NODE         node binary (default: node)
#   KAFKAJS_MODULES  a node_modules directory holding kafkajs
#                (default: target/npm/node_modules, where .ci/run installs it)
#
# Starts one server on a free port with a fresh data directory, runs every client
# scenario against it, then stops it with SIGTERM and checks that it exits cleanly.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
TIDELOG_BIN="${TIDELOG_BIN:-$root/target/debug/tidelog}"
PYTHON="${PYTHON:-python3}"
KCAT="${KCAT:-kcat}"
NODE="${NODE:-node}"
KAFKAJS_MODULES="${KAFKAJS_MODULES:-$root/target/npm/node_modules}"

for tool in "$TIDELOG_BIN" "$PYTHON" "$KCAT" "$NODE"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "interop: $tool not found" >&2; exit 1; }
done
if [ ! -f "$KAFKAJS_MODULES/kafkajs/package.json" ]; then
    echo "interop: kafkajs not found in $KAFKAJS_MODULES (npm install --prefix target/npm kafkajs)" >&2
    exit 1
fi

data="$(mktemp -d)"
log="$data.log"
port="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
export BOOTSTRAP="127.0.0.1:$port"

"$TIDELOG_BIN" serve --data "$data" --listen "$BOOTSTRAP" >"$log" 2>&1 &
server=$!
cleanup() {
    if kill -0 "$server" 2>/dev/null; then kill -KILL "$server" 2>/dev/null || true; fi
    rm -rf "$data" "$log"
}
trap cleanup EXIT

# Wait (up to 30 s) until the port accepts connections.
"$PYTHON" - <<PY
import socket, sys, time
deadline = time.time() + 30
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", $port), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit("interop: tidelog serve did not start listening on $BOOTSTRAP")
PY

status=0
run() {
    echo "== $1"
    if ! "${@:2}"; then
        echo "FAILED: $1" >&2
        status=1
    fi
}
run "kcat" "$here/kcat.sh"
run "kafka-python" "$PYTHON" "$here/kafka_python.py"
run "kafka-python, incremental fetch sessions (KIP-227)" "$PYTHON" "$here/kafka_python_fetch_sessions.py"
run "kafka-python, old request versions (OffsetCommit v0-1, DescribeConfigs v0, ...)" "$PYTHON" "$here/kafka_python_old_versions.py"
run "kafka-python, old message formats (Produce v1-2, Fetch v2-3)" "$PYTHON" "$here/kafka_python_old_messages.py"
run "confluent-kafka" "$PYTHON" "$here/confluent_kafka_client.py"
run "confluent-kafka admin groups" "$PYTHON" "$here/confluent_kafka_groups.py"
run "dynamic broker configs (confluent-kafka and kafka-python admin)" "$PYTHON" "$here/broker_configs.py"
run "confluent-kafka transactions" "$PYTHON" "$here/confluent_kafka_transactions.py"
run "kafkajs transactions" env NODE_PATH="$KAFKAJS_MODULES" "$NODE" "$here/kafkajs_transactions.js"
run "confluent-kafka consumer group protocol (KIP-848)" "$PYTHON" "$here/confluent_kafka_consumer_protocol.py"
run "confluent-kafka share consumers (KIP-932)" "$PYTHON" "$here/confluent_kafka_share.py"
run "compression" env TIDELOG_BIN="$TIDELOG_BIN" PYTHON="$PYTHON" KCAT="$KCAT" "$here/compression.sh"
run "security: SSL, SASL and ACLs with kcat, confluent-kafka and kafka-python" env TIDELOG_BIN="$TIDELOG_BIN" PYTHON="$PYTHON" KCAT="$KCAT" "$here/security.sh"
run "three-node cluster" env TIDELOG_BIN="$TIDELOG_BIN" PYTHON="$PYTHON" KCAT="$KCAT" "$here/cluster.sh"

# Graceful shutdown: SIGTERM, then a clean exit within 30 s.
kill -TERM "$server"
for _ in $(seq 300); do
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$server" 2>/dev/null; then
    echo "FAILED: tidelog serve did not exit after SIGTERM" >&2
    status=1
elif ! wait "$server"; then
    echo "FAILED: tidelog serve exited with an error after SIGTERM" >&2
    status=1
fi
if [ "$status" -ne 0 ]; then
    echo "--- server log ---" >&2
    cat "$log" >&2
fi
exit "$status"
