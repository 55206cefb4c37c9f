#!/usr/bin/env bash
# A three-node cluster on one host (three `tidelog serve --node-id N --quorum ...`):
#   1. kcat -L shows 3 brokers, and a replicated topic's replicas and ISR;
#   2. confluent-kafka creates a topic with replication factor 3, produces with
#      acks=all and consumes it in a group (cluster_confluent.py);
#   3. confluent-kafka's, kafka-python's and KafkaJS's transactional producers: commits,
#      an abort and fencing (confluent_kafka_transactions.py, kafkajs_transactions.js),
#      the coordinator on whichever node leads the id's __transaction_state partition;
#      confluent-kafka's consume-transform-produce loop with send_offsets_to_transaction,
#      every third transaction aborted, the transaction coordinator's node and an output
#      partition's leader killed (SIGKILL) mid-transaction and restarted, each copy read
#      once (confluent_kafka_copy.py);
#   4. confluent-kafka's ShareConsumer through a SIGKILL of the partition's leader
#      (confluent_kafka_share_failover.py);
#   5. kafka-python moves a partition, describes the log directories and elects its
#      preferred leader; confluent-kafka's elect_leaders too (cluster_partitions.py);
#   6. Kafka's quickstart failover: kill -9 the leader of a partition, `kcat -L` shows a
#      new leader and an ISR without the dead node, and `kcat -C -o beginning -e` still
#      returns every record.
#
# Environment: TIDELOG_BIN, PYTHON (with confluent-kafka), KCAT, NODE, KAFKAJS_MODULES
# (see run.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
TIDELOG_BIN="${TIDELOG_BIN:-$root/target/debug/tidelog}"
PYTHON="${PYTHON:-python3}"
KCAT="${KCAT:-kcat}"
NODE="${NODE:-node}"
KAFKAJS_MODULES="${KAFKAJS_MODULES:-$root/target/npm/node_modules}"

work="$(mktemp -d)"
# Six free ports below Linux's ephemeral range (32768-60999): a port the kernel hands out
# could become a node's outgoing connection before the node meant to listen on it binds.
ports=($("$PYTHON" - <<'PY'
import os, socket
socks = []
start = os.getpid() % 12000
for i in range(12000):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 20000 + (start + i) % 12000))
    except OSError:
        s.close()
        continue
    socks.append(s)
    if len(socks) == 6:
        break
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
))
quorum="1@127.0.0.1:${ports[3]},2@127.0.0.1:${ports[4]},3@127.0.0.1:${ports[5]}"
pids=(0 0 0)
start() {
    local i=$1
    RUST_LOG=info "$TIDELOG_BIN" serve --data "$work/node-$i" --listen "127.0.0.1:${ports[$((i - 1))]}" \
        --node-id "$i" --quorum "$quorum" --broker-session-timeout-ms 3000 \
        >>"$work/node-$i.log" 2>&1 &
    pids[$((i - 1))]=$!
}
cleanup() {
    status=$?
    for pid in "${pids[@]}"; do
        if [ "$pid" != 0 ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
    if [ "$status" -ne 0 ]; then
        for i in 1 2 3; do echo "--- node $i log (tail) ---" >&2; tail -n 30 "$work/node-$i.log" >&2 || true; done
    fi
    rm -rf "$work"
}
trap cleanup EXIT
# Runs a Python script ([VAR=VALUE]... SCRIPT) that asks for node kills and starts on
# its stdout ("@fault kill N", "@fault start N"), each answered "ok" once done; its other
# lines are printed.
faulted() {
    local vars=()
    while [[ "$1" == *=* ]]; do vars+=("$1"); shift; done
    coproc SCRIPT { env "${vars[@]}" PYTHONUNBUFFERED=1 "$PYTHON" "$@"; }
    local script_pid=$SCRIPT_PID out in line node
    exec {out}<&"${SCRIPT[0]}" {in}>&"${SCRIPT[1]}"
    while IFS= read -r line <&"$out"; do
        case "$line" in
            "@fault kill "*)
                node="${line##* }"
                kill -KILL "${pids[$((node - 1))]}"
                wait "${pids[$((node - 1))]}" 2>/dev/null || true
                pids[$((node - 1))]=0
                echo ok >&"$in"
                ;;
            "@fault start "*)
                start "${line##* }"
                echo ok >&"$in"
                ;;
            *) echo "$line" ;;
        esac
    done
    exec {out}<&- {in}>&-
    wait "$script_pid"
}
for i in 1 2 3; do start "$i"; done
export BOOTSTRAP="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"

# Wait (up to 60 s) for three brokers.
for _ in $(seq 120); do
    if "$KCAT" -b "$BOOTSTRAP" -L -m 2 2>/dev/null | grep -q " 3 brokers:"; then break; fi
    sleep 0.5
done
meta="$("$KCAT" -b "$BOOTSTRAP" -L -m 5)"
grep -q " 3 brokers:" <<<"$meta" || { echo "$meta" >&2; echo "cluster: not 3 brokers" >&2; exit 1; }

# 2. confluent-kafka: replicated topic, acks=all, group.
"$PYTHON" "$here/cluster_confluent.py"

# 3. Transactions, coordinated by the leader of each id's __transaction_state partition.
"$PYTHON" "$here/confluent_kafka_transactions.py"
#    And a consume-transform-produce copy with send_offsets_to_transaction, some
#    transactions aborted, the transaction coordinator's node and then an output
#    partition's leader killed with SIGKILL mid-transaction and started again: each
#    record's copy read exactly once (read_committed). The script asks for each kill
#    and start on its stdout ("@fault kill N", "@fault start N"), answered "ok".
faulted FAULTS=1 "$here/confluent_kafka_copy.py"

#    KafkaJS's transactional producer too: commit, abort, sendOffsets, fencing.
NODE_PATH="$KAFKAJS_MODULES" "$NODE" "$here/kafkajs_transactions.js"

# 4. confluent-kafka's ShareConsumer (share groups): two consumers of one partition
#    accept every record through a SIGKILL of its leader; none comes again once its
#    acceptance was committed.
faulted "$here/confluent_kafka_share_failover.py"

# 5. Partition moves, log directories and leader elections with Kafka's admin clients.
"$PYTHON" "$here/cluster_partitions.py"

# 1. and 6. kcat: the replicated topic's metadata, then the failover walk-through.
topic="failover-$$"
"$PYTHON" - <<PY
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": "$BOOTSTRAP"})
for f in admin.create_topics([NewTopic("$topic", num_partitions=1, replication_factor=3,
                                       config={"min.insync.replicas": "2"})]).values():
    f.result(30)
PY
meta="$("$KCAT" -b "$BOOTSTRAP" -L -t "$topic" -m 5)"
echo "$meta"
grep -Eq "partition 0, leader [123], replicas: [123],[123],[123], isrs: [123],[123],[123]" <<<"$meta" \
    || { echo "cluster: $topic is not replicated 3 ways" >&2; exit 1; }
seq 1 1000 | "$KCAT" -b "$BOOTSTRAP" -P -t "$topic" -p 0 -X acks=all -X enable.idempotence=true
leader="$(sed -nE 's/.*partition 0, leader ([0-9]+),.*/\1/p' <<<"$meta")"
echo "kill -9 node $leader (the leader of $topic-0)"
kill -KILL "${pids[$((leader - 1))]}"
wait "${pids[$((leader - 1))]}" 2>/dev/null || true
pids[$((leader - 1))]=0
live=""
for i in 1 2 3; do
    [ "$i" = "$leader" ] || live="${live:+$live,}127.0.0.1:${ports[$((i - 1))]}"
done
new=""
for _ in $(seq 60); do
    meta="$("$KCAT" -b "$live" -L -t "$topic" -m 3 2>/dev/null || true)"
    line="$(grep "partition 0," <<<"$meta" || true)"
    new="$(sed -nE 's/.*partition 0, leader ([0-9]+),.*/\1/p' <<<"$line")"
    isrs="$(sed -nE 's/.*isrs: ([0-9,]+).*/\1/p' <<<"$line")"
    if [ -n "$new" ] && [ "$new" != "$leader" ] && [ "$new" != "-1" ] && ! grep -q "$leader" <<<"$isrs"; then
        break
    fi
    new=""
    sleep 0.5
done
[ -n "$new" ] || { echo "$meta" >&2; echo "cluster: no new leader without node $leader" >&2; exit 1; }
echo "$line"
got="$("$KCAT" -b "$live" -C -t "$topic" -o beginning -e -q | wc -l)"
if [ "$got" -ne 1000 ]; then
    echo "cluster: read $got of 1000 records after the failover" >&2
    exit 1
fi
echo "cluster: new leader $new, every record still there"

# The survivors stop cleanly on SIGTERM (controlled shutdown where a controller is left),
# all at once: one after another, the last would wait out its controlled shutdown alone.
for i in 0 1 2; do
    if [ "${pids[$i]}" != 0 ]; then kill -TERM "${pids[$i]}"; fi
done
for i in 0 1 2; do
    pid="${pids[$i]}"
    [ "$pid" != 0 ] || continue
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null || ! wait "$pid"; then
        echo "cluster: node $((i + 1)) did not exit cleanly after SIGTERM" >&2
        exit 1
    fi
    pids[$i]=0
done
