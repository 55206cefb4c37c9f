"""Request versions Kafka 4.0 removed and Kafka 3.9 answers, as an older client sends
them, encoded by kafka-python's own classes for those versions (kafka.protocol.old):
OffsetCommit v1 (with its commit timestamp) and OffsetFetch v1 read it back,
OffsetCommit v0 (ZooKeeper's: UNSUPPORTED_VERSION), DescribeConfigs v0, CreateTopics v0,
ListOffsets v0 (old_style_offsets) and DeleteTopics v0. The connection must stay open
after each."""
import os
import socket
import struct
import time
import uuid

from kafka.protocol.old.admin import (
    CreateTopicsRequest_v0, CreateTopicsResponse_v0, DeleteTopicsRequest_v0,
    DeleteTopicsResponse_v0, DescribeConfigsRequest_v0, DescribeConfigsResponse_v0,
)
from kafka.protocol.old.list_offsets import ListOffsetsRequest_v0, ListOffsetsResponse_v0
from kafka.protocol.old.commit import (
    OffsetCommitRequest_v0, OffsetCommitRequest_v1, OffsetCommitResponse_v0,
    OffsetCommitResponse_v1, OffsetFetchRequest_v1, OffsetFetchResponse_v1,
)

host, port = os.environ["BOOTSTRAP"].rsplit(":", 1)
TOPIC = "old-versions-" + uuid.uuid4().hex[:8]
GROUP = "old-versions-group-" + uuid.uuid4().hex[:8]

sock = socket.create_connection((host, int(port)), timeout=30)
corr = 0


def call(request, response_class):
    """Sends `request` with a v1 header on the one connection, returns its response."""
    global corr
    corr += 1
    request.with_header(correlation_id=corr, client_id="old-client")
    sock.sendall(request.encode(header=True, framed=True))
    size = struct.unpack(">i", recv(4))[0]
    data = recv(size)
    got = struct.unpack(">i", data[:4])[0]
    assert got == corr, (got, corr)
    return response_class.decode(data[4:])


def recv(n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "the server closed the connection"
        out += chunk
    return out


r = call(CreateTopicsRequest_v0(topics=[(TOPIC, 2, 1, [], [])], timeout_ms=10000),
         CreateTopicsResponse_v0)
assert [tuple(t) for t in r.topics] == [(TOPIC, 0)], r
print("CreateTopics v0:", r.topics)

now_ms = int(time.time() * 1000)
r = call(OffsetCommitRequest_v1(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                topics=[(TOPIC, [(0, 42, now_ms - 60000, "old-client"), (1, 7, -1, "")])]),
         OffsetCommitResponse_v1)
assert [(t[0], sorted(tuple(p) for p in t[1])) for t in r.topics] == [(TOPIC, [(0, 0), (1, 0)])], r
print("OffsetCommit v1:", r.topics)

r = call(OffsetFetchRequest_v1(group_id=GROUP, topics=[(TOPIC, [0, 1])]), OffsetFetchResponse_v1)
got = sorted(tuple(p) for p in r.topics[0][1])
assert got == [(0, 42, "old-client", 0), (1, 7, "", 0)], got
print("OffsetFetch v1:", got)

r = call(OffsetCommitRequest_v0(group_id=GROUP, topics=[(TOPIC, [(0, 43, "")])]),
         OffsetCommitResponse_v0)
assert [tuple(p) for p in r.topics[0][1]] == [(0, 35)], r
print("OffsetCommit v0: UNSUPPORTED_VERSION (offsets in ZooKeeper)")

r = call(DescribeConfigsRequest_v0(resources=[(2, TOPIC, ["cleanup.policy"])]),
         DescribeConfigsResponse_v0)
result = r.resources[0]
assert result[0] == 0 and result[3] == TOPIC, r
configs = [tuple(c) for c in result[4]]
assert configs == [("cleanup.policy", "delete", False, True, False)], configs
print("DescribeConfigs v0:", configs)

# Earliest (-2) and latest (-1) of the empty partition 0, one offset each; a partition
# that does not exist answers UNKNOWN_TOPIC_OR_PARTITION with no offsets.
r = call(ListOffsetsRequest_v0(replica_id=-1, topics=[(TOPIC, [(0, -2, 1), (1, -1, 1), (9, -1, 1)])]),
         ListOffsetsResponse_v0)
got = sorted(tuple((p[0], p[1], list(p[2]))) for p in r.topics[0][1])
assert got == [(0, 0, [0]), (1, 0, [0]), (9, 3, [])], got
print("ListOffsets v0:", got)

r = call(DeleteTopicsRequest_v0(topic_names=[TOPIC], timeout_ms=10000), DeleteTopicsResponse_v0)
assert [tuple(t) for t in r.topic_error_codes] == [(TOPIC, 0)], r
print("DeleteTopics v0:", r.topic_error_codes)
sock.close()
