"""confluent-kafka's consume-transform-produce loop on a three-node cluster, through node
crashes: a group consumer reads an input topic, a transactional producer writes a copy
of each record to an output topic and sends the consumer's next offsets to the same
transaction (send_offsets_to_transaction); every third transaction is aborted, and the
consumer goes back to the group's committed offsets to copy those records again.

With FAULTS=1 (cluster.sh), two nodes are killed with SIGKILL while a transaction is
open and started again a few transactions later: first the transaction coordinator's
node, once the transaction's copies are flushed and before its offsets are sent and it
commits; then the leader of an output partition, with the transaction's copies not yet
flushed. The loop goes on with whatever the client answers (committed, retried, aborted,
or a new producer instance after a fatal error), going back to the group's committed
offsets whenever a transaction did not commit. The script asks cluster.sh for each kill
and start on stdout ("@fault kill N", "@fault start N") and reads "ok" on stdin.

The group coordinator's node is never killed: librdkafka's send_offsets_to_transaction
keeps the group coordinator it found, and once that node has left the metadata (as a
dead node does, on Kafka too) it waits for it without end, past its own timeout (a
librdkafka bug, open). The transactional id is chosen so that its coordinator is on
another node than the group's.

A read_committed consumer of the output then finds every input record's copy exactly
once, and the group's committed offsets are the input's ends.

Run by cluster.sh with BOOTSTRAP set to the three nodes' addresses.
"""
import collections
import faulthandler
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
FAULTS = os.environ.get("FAULTS") == "1"
IN, OUT = "copy-in", "copy-out"
PARTITIONS = 3
RECORDS = 600
GROUP = "copy-group"
OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
# Committed transactions before the first kill, and between a kill and the restart.
COMMITS_BEFORE_KILL = 3
COMMITS_BEFORE_RESTART = 2
STARTED = time.time()
DEADLINE = STARTED + 120
# A client call that outlives its own timeout: print where every thread is, and stop.
faulthandler.dump_traceback_later(DEADLINE - STARTED + 60, exit=True)


def check_deadline(what):
    if time.time() > DEADLINE:
        sys.exit(f"confluent-kafka copy: out of time while {what}")


def log(line):
    print(f"confluent-kafka copy: {line}", flush=True)


def fault(command, node):
    """Has cluster.sh kill (SIGKILL) or start node `node`; returns once it is done."""
    print(f"@fault {command} {node}", flush=True)
    reply = sys.stdin.readline().strip()
    if reply != "ok":
        sys.exit(f"confluent-kafka copy: cluster.sh answered {reply!r} to {command} {node}")


def retried(what, call):
    """`call()`, again after a KafkaException while a node is down (until the deadline)."""
    while True:
        try:
            return call()
        except KafkaException as e:
            check_deadline(f"{what} ({e})")
            time.sleep(0.2)


admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics(
    [NewTopic(t, num_partitions=PARTITIONS, replication_factor=3) for t in (IN, OUT)]
).values():
    f.result(30)

source = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all"})
for i in range(RECORDS):
    source.produce(IN, key=f"k-{i}".encode(), value=f"v-{i}".encode())
assert source.flush(30) == 0, "the input was not all acknowledged"

consumer = Consumer({
    "bootstrap.servers": BOOTSTRAP,
    "group.id": GROUP,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
})
consumer.subscribe([IN])


def transactional_producer():
    """A producer of TXN_ID, its transactions initialized (fencing any earlier one)."""
    p = Producer({
        "bootstrap.servers": BOOTSTRAP,
        "transactional.id": TXN_ID,
        "transaction.timeout.ms": 30000,
        # librdkafka's debug contexts for the transactional producer, to see a failure.
        **({"debug": os.environ["TXN_DEBUG"]} if os.environ.get("TXN_DEBUG") else {}),
    })
    retried("initializing the transactional producer", lambda: p.init_transactions(30))
    return p


inputs = [TopicPartition(IN, p) for p in range(PARTITIONS)]
ends = {}
for tp in inputs:
    low, high = consumer.get_watermark_offsets(tp, timeout=10)
    ends[tp.partition] = high
assert sum(ends.values()) == RECORDS, ends


def committed():
    """The group's committed offset of each input partition (stable offsets only)."""
    tps = retried("reading the group's offsets", lambda: consumer.committed(inputs, timeout=10))
    return {tp.partition: tp.offset for tp in tps}


def rewind():
    """Back to the group's committed offsets (the start where none is committed)."""
    offsets = committed()
    for tp in consumer.assignment():
        offset = offsets.get(tp.partition, -1)
        try:
            consumer.seek(TopicPartition(tp.topic, tp.partition, max(offset, 0)))
        except KafkaException:
            # Revoked meanwhile: a new assignment starts at the committed offsets anyway.
            pass


def leader(topic, partition):
    md = retried("reading metadata", lambda: admin.list_topics(topic=topic, timeout=10))
    return md.topics[topic].partitions[partition].leader


def key_leader(topic, key):
    """The leader of the partition of `topic` that coordinates `key` (once it has one)."""
    while True:
        check_deadline(f"waiting for {topic}")
        md = retried("reading metadata", lambda: admin.list_topics(topic=topic, timeout=10))
        partitions = md.topics[topic].partitions if topic in md.topics else {}
        if partitions:
            node = partitions[java_hash_partition(key, len(partitions))].leader
            if node >= 0:
                return node
        time.sleep(0.2)


def java_hash_partition(key, partitions):
    """Kafka's coordinator partition of a key: abs(String.hashCode) % partitions."""
    data, h = key.encode("utf-16-be"), 0
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def coordinator():
    """The node leading TXN_ID's partition of __transaction_state."""
    return key_leader(TXN_STATE, TXN_ID)


def group_coordinator():
    """The node leading GROUP's partition of __consumer_offsets."""
    return key_leader(OFFSETS, GROUP)


# The group's coordinator (the consumer's FindCoordinator makes __consumer_offsets);
# the first transactional id whose coordinator is on another node.
TXN_ID = "copy-txn-0"
producer = transactional_producer()
if FAULTS:
    for i in range(1, 20):
        if coordinator() != group_coordinator():
            break
        TXN_ID = f"copy-txn-{i}"
        producer = transactional_producer()
    assert coordinator() != group_coordinator(), "no transactional id away from the group"


def wait_whole():
    """Until three brokers are up and every copy partition has three in-sync replicas."""
    while True:
        check_deadline("waiting for the restarted node to catch up")
        md = retried("reading metadata", lambda: admin.list_topics(timeout=10))
        isrs = [
            len(p.isrs)
            for t in (IN, OUT)
            for p in md.topics[t].partitions.values()
        ] if all(t in md.topics for t in (IN, OUT)) else []
        if len(md.brokers) == 3 and isrs and min(isrs) == 3:
            return
        time.sleep(0.2)


def finish(abort):
    """Commits (or aborts) the open transaction; True if it committed."""
    global producer, failed
    for _ in range(5):
        try:
            if abort:
                producer.abort_transaction(30)
                return False
            producer.commit_transaction(30)
            return True
        except KafkaException as e:
            err = e.args[0]
            log(f"{'abort' if abort else 'commit'} failed: {err}")
            if err.txn_requires_abort():
                abort = True
            elif not err.retriable():
                # Fatal (fenced, or the instance's state is lost): a new instance fences
                # this one and ends its transaction, whichever way the coordinator does.
                producer = transactional_producer()
                failed += 1
                return False
    sys.exit("confluent-kafka copy: no answer to the end of a transaction after five tries")


# Faults still to make: (what, the node to kill), each killed mid-transaction and
# started again after COMMITS_BEFORE_RESTART more commits.
faults = ["coordinator", "leader"] if FAULTS else []
down = None  # (node, commits when it was killed)
transactions = aborted = failed = 0
commits = 0
while committed() != ends:
    check_deadline("copying")
    if down is not None and commits >= down[1] + COMMITS_BEFORE_RESTART:
        fault("start", down[0])
        log(f"node {down[0]} started again")
        down = None
        wait_whole()
    batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if m is not None]
    errors = [m.error() for m in batch if m.error() is not None]
    assert all(e.code() == KafkaError._PARTITION_EOF for e in errors), errors
    batch = [m for m in batch if m.error() is None]
    if not batch:
        continue
    transactions += 1
    abort = transactions % 3 == 0
    kill = None
    if faults and down is None and commits >= COMMITS_BEFORE_KILL and not abort:
        kill = faults.pop(0)
    # The offsets to commit: past each partition's last record in the batch.
    offsets = {}
    for m in batch:
        offsets[m.partition()] = max(offsets.get(m.partition(), 0), m.offset() + 1)
    try:
        producer.begin_transaction()
        for m in batch:
            producer.produce(OUT, key=m.key(), value=b"copy-" + m.value())
        if kill == "leader":
            spared = {coordinator(), group_coordinator()}
            victim = next(
                n for n in [leader(OUT, p) for p in range(PARTITIONS)] + [1, 2, 3]
                if n not in spared
            )
            fault("kill", victim)
            leads = [p for p in range(PARTITIONS) if leader(OUT, p) == victim]
            log(f"killed node {victim} (leader of {OUT} partitions {leads}), with a "
                "transaction's copies unsent")
            down = (victim, commits)
        producer.flush(30)
        if kill == "coordinator":
            victim = coordinator()
            assert victim != group_coordinator(), "the group coordinator is never killed"
            fault("kill", victim)
            log(f"killed node {victim}, the transaction coordinator, before the commit")
            down = (victim, commits)
        producer.send_offsets_to_transaction(
            [TopicPartition(IN, p, o) for p, o in sorted(offsets.items())],
            consumer.consumer_group_metadata(),
            30,
        )
    except KafkaException as e:
        err = e.args[0]
        log(f"transaction failed before its end: {err}")
        if err.fatal():
            producer = transactional_producer()
            failed += 1
            rewind()
            continue
        abort = True
    if finish(abort):
        commits += 1
    else:
        aborted += 1
        rewind()
consumer.close()
assert aborted > 0, "no transaction was aborted"
if FAULTS:
    assert not faults, f"faults not made: {faults}"
    if down is not None:
        fault("start", down[0])
        log(f"node {down[0]} started again")
    wait_whole()

reader = Consumer({
    "bootstrap.servers": BOOTSTRAP,
    "group.id": "copy-reader",
    "enable.auto.commit": False,
    "isolation.level": "read_committed",
})
outputs = [TopicPartition(OUT, p, 0) for p in range(PARTITIONS)]
reader.assign(outputs)
# The last stable offset of each output partition: read until the position passes it
# (the last records of a log are markers, which are never delivered).
out_ends = {tp.partition: reader.get_watermark_offsets(tp, timeout=10)[1] for tp in outputs}
values = []
while True:
    check_deadline("reading the copies")
    positions = {tp.partition: tp.offset for tp in reader.position(outputs)}
    if all(positions[p] >= out_ends[p] for p in out_ends):
        break
    m = reader.poll(0.2)
    if m is None:
        continue
    if m.error():
        if m.error().code() == KafkaError._PARTITION_EOF:
            continue
        sys.exit(f"confluent-kafka copy: reader error: {m.error()}")
    values.append(m.value().decode())
reader.close()

counts = collections.Counter(values)
expected = {f"copy-v-{i}" for i in range(RECORDS)}
missing = expected - counts.keys()
twice = {v: n for v, n in counts.items() if n != 1}
unknown = counts.keys() - expected
assert not missing and not twice and not unknown, (sorted(missing)[:10], twice, unknown)
log(f"{RECORDS} records copied exactly once in {transactions} transactions ({aborted} "
    f"aborted, {failed} lost to a fatal error), {2 if FAULTS else 0} nodes killed and "
    f"started again, {time.time() - STARTED:.1f} s")
