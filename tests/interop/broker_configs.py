"""Dynamic broker configs of a single `tidelog serve` through Kafka's admin clients:
confluent-kafka's describe_configs and incremental_alter_configs on the node's BROKER
resource ("0", with the read-only `node.id` it was started with), kafka-python's describe_configs (modified and dynamic keys) and
alter_configs (the older AlterConfigs, which replaces the resource's settings); a key
that cannot change while the broker runs and a bad value are refused with Kafka's
errors (the clients send another broker's resource to that broker). Everything set is
removed again at the end.

Run by run.sh with BOOTSTRAP set to the server's address.
"""
import os
import sys

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as PyConfigResource
from kafka.admin import ConfigResourceType

BOOTSTRAP = os.environ["BOOTSTRAP"]
MOVE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER = "leader.replication.throttled.rate"
FOLLOWER = "follower.replication.throttled.rate"
UNLIMITED = str(2**63 - 1)

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})


def describe(name):
    """{key: (value, source)} of broker resource `name`."""
    res = ConfigResource(ResourceType.BROKER, name)
    entries = admin.describe_configs([res])[res].result(30)
    return {k: (e.value, ConfigSource(e.source)) for k, e in entries.items()}


def alter(name, ops):
    """incremental_alter_configs of broker resource `name`; the error, or None."""
    res = ConfigResource(
        ResourceType.BROKER,
        name,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                        else AlterConfigOpType.DELETE)
            for k, v in ops
        ],
    )
    try:
        admin.incremental_alter_configs([res])[res].result(30)
        return None
    except KafkaException as e:
        return e.args[0]


def expect(got, want, what):
    if got != want:
        sys.exit("%s: got %r, want %r" % (what, got, want))


before = describe("0")
# The settings the node started with are listed too, read-only, as Kafka lists them.
node_res = ConfigResource(ResourceType.BROKER, "0")
node_id = admin.describe_configs([node_res])[node_res].result(30)["node.id"]
expect((node_id.value, node_id.is_read_only, ConfigSource(node_id.source)),
       ("0", True, ConfigSource.STATIC_BROKER_CONFIG), "node.id")
for key in (LEADER, FOLLOWER, MOVE):
    expect(before.get(key), (UNLIMITED, ConfigSource.DEFAULT_CONFIG), "default " + key)

# (Neither client takes the cluster-wide default's empty resource name; the server's own
# tests cover it.)
expect(alter("0", [(LEADER, "500000"), (MOVE, "1000000")]), None, "set the node's own")
now = describe("0")
expect(now[MOVE], ("1000000", ConfigSource.DYNAMIC_BROKER_CONFIG), "move rate")
expect(now[LEADER], ("500000", ConfigSource.DYNAMIC_BROKER_CONFIG), "leader rate")

err = alter("0", [("num.partitions", "3")])
if err is None or err.code() != KafkaError.INVALID_CONFIG or "num.partitions" not in err.str():
    sys.exit("a key that is not dynamic: %r" % (err,))
err = alter("0", [(LEADER, "fast")])
if err is None or err.code() != KafkaError.INVALID_CONFIG or "fast" not in err.str():
    sys.exit("a bad rate: %r" % (err,))
expect(describe("0")[LEADER][0], "500000", "refusals changed nothing")

# kafka-python: its describe_configs, and its alter_configs over the older AlterConfigs
# (which replaces the resource's settings: the client sends the modified ones again).
py = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)


def py_describe(config_filter):
    described = py.describe_configs(
        [PyConfigResource(ConfigResourceType.BROKER, "0")], config_filter=config_filter)
    return {k: (c["value"], c["config_source"]) for k, c in described["broker"]["0"].items()}


expect(py_describe("modified"), {
    LEADER: ("500000", "DYNAMIC_BROKER_CONFIG"),
    MOVE: ("1000000", "DYNAMIC_BROKER_CONFIG"),
}, "kafka-python's modified configs")
expect(sorted(py_describe("dynamic")), sorted([LEADER, FOLLOWER, MOVE]), "the dynamic keys")
altered = py.alter_configs(
    [PyConfigResource(ConfigResourceType.BROKER, "0", configs={FOLLOWER: "700000"})],
    incremental=False)
expect(altered, {"broker": {"0": "OK"}}, "kafka-python's AlterConfigs")
now = describe("0")
expect(now[FOLLOWER], ("700000", ConfigSource.DYNAMIC_BROKER_CONFIG), "kafka-python's value")
expect(now[LEADER], ("500000", ConfigSource.DYNAMIC_BROKER_CONFIG), "sent again, kept")
try:
    py.alter_configs([PyConfigResource(ConfigResourceType.BROKER, "0", configs={"num.partitions": "3"})])
    sys.exit("kafka-python altered a key that is not dynamic")
except ValueError as e:
    if "num.partitions" not in str(e):
        raise
py.close()

expect(alter("0", [(LEADER, None), (FOLLOWER, None), (MOVE, None)]), None, "remove them")
expect(describe("0"), before, "all removed")
print("broker configs: described, altered and refused as Kafka does")
