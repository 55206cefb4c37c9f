// KafkaJS's transactional producer against tidelog serve (a single node, run.sh, or three,
// cluster.sh, where the topics get three replicas): commit, abort,
// commit again, offsets sent with a transaction (sendOffsets), fencing of an instance
// by a second producer with the same transactionalId; a read_committed consumer
// (KafkaJS's default) sees exactly the committed records, and the group's offsets are
// those of the committed transaction.
//
// Needs kafkajs on NODE_PATH (.ci/run installs it) and BOOTSTRAP (host:port, or a
// comma-separated list of them).
'use strict';

const { Kafka, logLevel } = require('kafkajs');

const bootstrap = process.env.BOOTSTRAP;
if (!bootstrap) {
    console.error('kafkajs: BOOTSTRAP is not set');
    process.exit(2);
}

const brokers = bootstrap.split(',');
const replicationFactor = Math.min(brokers.length, 3);
const run = Date.now();
const topic = `kafkajs-txn-${run}`;
const input = `kafkajs-txn-input-${run}`;
const transactionalId = `kafkajs-txn-${run}`;
const copier = `kafkajs-copier-${run}`;
const kafka = new Kafka({
    clientId: 'tidelog-kafkajs',
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 100 },
});

function check(ok, what) {
    if (!ok) {
        throw new Error(`kafkajs: ${what}`);
    }
}

// One send per record, one after another. A KafkaJS 2 send to partitions of several
// leaders adds each leader's partitions (AddPartitionsToTxn) and produces to them in
// parallel; when the coordinator answers one add CONCURRENT_TRANSACTIONS, as Kafka's
// does while another add of the transaction is being written, KafkaJS retries the whole
// send and produces the records of a leader whose request was still in flight again,
// under the next sequence numbers, so they are written twice. That is the client's; one
// partition per send keeps it out of this test of the broker.
async function transaction(producer, records, then) {
    const txn = await producer.transaction();
    for (const record of records) {
        await txn.send({ topic, messages: [record] });
    }
    if (then === 'offsets') {
        await txn.sendOffsets({
            consumerGroupId: copier,
            topics: [{ topic: input, partitions: [{ partition: 0, offset: '5' }] }],
        });
        await txn.commit();
    } else if (then === 'abort') {
        await txn.abort();
    } else {
        await txn.commit();
    }
}

async function readCommitted(want) {
    const consumer = kafka.consumer({ groupId: `kafkajs-reader-${run}`, readUncommitted: false });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const seen = [];
    let resolve;
    const done = new Promise((r) => { resolve = r; });
    await consumer.run({
        eachMessage: async ({ message }) => {
            seen.push(message.value.toString());
            if (seen.length >= want) {
                resolve();
            }
        },
    });
    const timer = setTimeout(resolve, 30000);
    await done;
    // Anything else would have arrived with the batches read: wait a little more.
    await new Promise((r) => setTimeout(r, 1000));
    clearTimeout(timer);
    await consumer.disconnect();
    return seen;
}

async function main() {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({
        waitForLeaders: true,
        topics: [
            { topic, numPartitions: 2, replicationFactor },
            { topic: input, numPartitions: 1, replicationFactor },
        ],
    });

    const producer = kafka.producer({ transactionalId, maxInFlightRequests: 1, idempotent: true });
    await producer.connect();
    await transaction(producer, [
        { key: 'k0', value: 'c0', partition: 0 },
        { key: 'k1', value: 'c1', partition: 1 },
    ], 'offsets');
    await transaction(producer, [
        { value: 'a0', partition: 0 },
        { value: 'a1', partition: 1 },
    ], 'abort');
    await transaction(producer, [
        { value: 'c2', partition: 0 },
        { value: 'c3', partition: 1 },
    ], 'commit');

    // A second instance with the same transactionalId fences the first.
    const newer = kafka.producer({ transactionalId, maxInFlightRequests: 1, idempotent: true });
    await newer.connect();
    // KafkaJS initializes (InitProducerId, bumping the epoch) on the first transaction.
    const newerTxn = await newer.transaction();
    let fenced = null;
    try {
        await transaction(producer, [{ value: 'zombie', partition: 0 }], 'commit');
    } catch (e) {
        fenced = e;
    }
    check(fenced !== null, 'the fenced instance committed a transaction');
    check(/fenced|epoch/i.test(`${fenced.type} ${fenced.message}`),
        `the fenced instance failed with ${fenced.type}: ${fenced.message}`);
    await newerTxn.send({ topic, messages: [{ value: 'c4', partition: 1 }] });
    await newerTxn.commit();
    await newer.disconnect();
    await producer.disconnect().catch(() => {});

    const seen = await readCommitted(5);
    const sorted = [...seen].sort();
    check(JSON.stringify(sorted) === JSON.stringify(['c0', 'c1', 'c2', 'c3', 'c4']),
        `read_committed saw ${JSON.stringify(seen)}`);

    const offsets = await admin.fetchOffsets({ groupId: copier, topics: [input] });
    const committed = offsets[0].partitions.find((p) => p.partition === 0).offset;
    check(committed === '5', `the offsets sent with the transaction: ${committed}`);
    await admin.deleteTopics({ topics: [topic, input] }).catch(() => {});
    await admin.disconnect();
    console.log('kafkajs transactions: ok');
}

main().catch((e) => {
    console.error(e);
    process.exit(1);
});
