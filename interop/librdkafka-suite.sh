#!/usr/bin/env bash
# librdkafka's own integration tests against a three-node `tidelog serve` cluster.
#
# The rdkafka crate ships librdkafka without its tests/ directory, so this script takes
# librdkafka's upstream source from a package registry: 2.0.2 from Debian's archive
# (checked against the SHA-256 of Debian's librdkafka_2.0.2-1.dsc; the default), or 2.15.1
# (RDK_SOURCE=npm) from the npm package @confluentinc/kafka-javascript 1.10.1, which
# carries librdkafka's whole source tree, tests included, in deps/librdkafka (checked
# against the tarball's SHA-256; its SHA-512 is the registry's `dist.integrity`). It
# builds the library and librdkafka's test runner once into target/librdkafka-suite/
# (2 to 3 minutes on 2 cores; later runs reuse it), starts
# three nodes on free ports of 127.0.0.1 with the settings of librdkafka's "default" test
# scenario (three brokers, topics created on first use with 4 partitions and 3 replicas:
# its tests rely on both), runs each test of the
# list with TEST_KAFKA_VERSION=3.9.0 (4.2.0 for 2.15.1, whose share consumer tests need
# it) and prints PASS/FAIL per test.
#
# Usage: interop/librdkafka-suite.sh [TEST[:SUBTESTS]]...
#   TEST is a test number (0103), SUBTESTS a substring of the sub-tests to run (as the
#   test runner's SUBTESTS variable). Without arguments the list below runs.
#
# Needs: curl, sha256sum, make, gcc, g++, python3 (free ports), libzstd-dev for
# RDK_SOURCE=npm, and the tidelog binary
# built with the cli and server features (TIDELOG_BIN, default target/release/tidelog:
# `cargo build --release --all-features --bin tidelog`).
#
# Environment:
#   TIDELOG_BIN        the tidelog binary
#   RDK_SUITE_DIR      build cache and logs (default target/librdkafka-suite)
#   RDK_TEST_TIMEOUT   seconds one test may take (default 600)
#   RDK_KEEP_LOGS=1    keep the nodes' data directories and logs after a pass too
#   RDK_SCENARIO       librdkafka's test scenario: default, or noautocreate (the nodes
#                      create no topic on first use; e.g. for 0045's topic_remove and
#                      non_exist_and_partchange, which only run there)
#   RDK_SOURCE         debian (librdkafka 2.0.2, the default) or npm (librdkafka 2.15.1:
#                      the share consumer tests, KIP-932)
#   RDK_GROUP_PROTOCOL classic (the default) or consumer: the group protocol librdkafka's
#                      group tests use (TEST_CONSUMER_GROUP_PROTOCOL; KIP-848, 2.15.1)
#
# Exit status: 0 when every test of the list passed, 1 when one failed, 2 when the
# build or the cluster could not be set up.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
TIDELOG_BIN="${TIDELOG_BIN:-$root/target/release/tidelog}"
SUITE_DIR="${RDK_SUITE_DIR:-$root/target/librdkafka-suite}"
TEST_TIMEOUT="${RDK_TEST_TIMEOUT:-600}"
SCENARIO="${RDK_SCENARIO:-default}"
case "$SCENARIO" in
    default) scenario_args=() ;;
    noautocreate) scenario_args=(--no-auto-create-topics) ;;
    *) echo "librdkafka-suite: unknown RDK_SCENARIO $SCENARIO (default, noautocreate)" >&2; exit 2 ;;
esac

SOURCE="${RDK_SOURCE:-debian}"
GROUP_PROTOCOL="${RDK_GROUP_PROTOCOL:-classic}"
case "$SOURCE" in
    debian)
        RDK_VERSION=2.0.2
        RDK_URL="http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_${RDK_VERSION}.orig.tar.gz"
        RDK_SHA256=f321bcb1e015a34114c83cf1aa7b99ee260236aab096b85c003170c90a47ca9d
        RDK_TREE="librdkafka-$RDK_VERSION"
        KAFKA_VERSION=3.9.0
        ;;
    npm)
        RDK_VERSION=2.15.1
        RDK_URL="https://registry.npmjs.org/@confluentinc/kafka-javascript/-/kafka-javascript-1.10.1.tgz"
        RDK_SHA256=ada7d703bb1d3237e2292bfabf438d663b6160c9f1ac2a2406b5dc4257c81b66
        RDK_TREE="package/deps/librdkafka"
        KAFKA_VERSION=4.2.0
        ;;
    *) echo "librdkafka-suite: unknown RDK_SOURCE $SOURCE (debian, npm)" >&2; exit 2 ;;
esac
# librdkafka's test clusters for share consumers (tests/cluster_testing.py) let a group
# hold records for as little as a second; its tests set such lock durations.
if [ "$SOURCE" = npm ]; then
    scenario_args+=(--group-share-min-record-lock-duration-ms 1000)
fi
case "$GROUP_PROTOCOL" in
    classic | consumer) ;;
    *) echo "librdkafka-suite: unknown RDK_GROUP_PROTOCOL $GROUP_PROTOCOL (classic, consumer)" >&2; exit 2 ;;
esac

# The tests of the list: NUMBER or NUMBER:SUBTESTS (a substring of sub-test names).
#   0103  transactions: misuse, commit/abort with and without compression,
#         consume-transform-produce, fencing, KIP-360 recovery, empty transactions,
#         read_committed high watermarks
#   0129  a fetch answer holding only aborted records
#   0055  producer latency: its transactional sub-test (a commit per message)
#   0061  consumer lag with aborted transactions and control records
#   0137  batch consume after a seek
#   not listed: 0098 (the transactional consumer; it drives a Java producer of Kafka's)
#   group and consumer tests: 0018 0019 0029 0040 0050 0056 0102 0118 0130 0132 (also
#   passing, on request: 0020 0022 0026 0030 0045 0051 0090 0099)
#   With RDK_SOURCE=npm (librdkafka 2.15.1), the share consumer tests against a broker:
#   0170-0181, 0184, 0185 (0182, 0183 and 0186 use librdkafka's mock cluster or none).
DEFAULT_TESTS=(0103 0129 0055:transactions 0061 0137 0018 0019 0029 0040 0050 0056 0102 0118 0130 0132)
if [ "$SOURCE" = npm ]; then
    DEFAULT_TESTS=(0170 0171 0172 0173 0174 0175 0176 0177 0178 0179 0180 0181 0184 0185)
fi
if [ "$#" -gt 0 ]; then TESTS_LIST=("$@"); else TESTS_LIST=("${DEFAULT_TESTS[@]}"); fi

die() { echo "librdkafka-suite: $*" >&2; exit 2; }
for tool in curl sha256sum make gcc g++ python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
if [ "$SOURCE" = npm ] && [ ! -e /usr/include/zstd.h ]; then
    die "librdkafka $RDK_VERSION's tests need zstd: install libzstd-dev"
fi
[ -x "$TIDELOG_BIN" ] || die "$TIDELOG_BIN not found (cargo build --release --all-features --bin tidelog)"

start=$(date +%s)
mkdir -p "$SUITE_DIR"
src="$SUITE_DIR/librdkafka-$RDK_VERSION"
tarball="$SUITE_DIR/librdkafka-${RDK_VERSION}-${SOURCE}.tar.gz"

# --- build (cached) -----------------------------------------------------------------
if [ ! -x "$src/tests/test-runner" ]; then
    if [ ! -f "$tarball" ] || ! echo "$RDK_SHA256  $tarball" | sha256sum -c --quiet - 2>/dev/null; then
        echo "== downloading $RDK_URL"
        curl -sSfL --retry 3 -o "$tarball.part" "$RDK_URL" || die "download failed: $RDK_URL"
        echo "$RDK_SHA256  $tarball.part" | sha256sum -c --quiet - \
            || { rm -f "$tarball.part"; die "checksum mismatch for $RDK_URL"; }
        mv "$tarball.part" "$tarball"
    fi
    rm -rf "$src" "$SUITE_DIR/unpack"
    mkdir -p "$SUITE_DIR/unpack"
    tar -xzf "$tarball" -C "$SUITE_DIR/unpack" "$RDK_TREE"
    mv "$SUITE_DIR/unpack/$RDK_TREE" "$src"
    rm -rf "$SUITE_DIR/unpack"
    chmod +x "$src/configure"
    echo "== building librdkafka $RDK_VERSION and its test runner (log: $SUITE_DIR/build.log)"
    build_start=$(date +%s)
    (
        cd "$src"
        # Only what the tests below need: no TLS, SASL/GSSAPI, HTTP or external lz4, so
        # that no headers beyond zlib's are needed (zlib is used when present); zstd only
        # for 2.15.1, whose share consumer tests use every codec (libzstd-dev).
        zstd=(--disable-zstd)
        [ "$SOURCE" = npm ] && zstd=()
        ./configure --no-download --disable-ssl --disable-gssapi --disable-curl \
            "${zstd[@]}" --disable-lz4-ext
        make -j2 libs
        make -j2 -C tests test-runner
    ) >"$SUITE_DIR/build.log" 2>&1 || { tail -n 30 "$SUITE_DIR/build.log" >&2; die "build failed"; }
    echo "   built in $(( $(date +%s) - build_start )) s"
fi

# --- a three-node cluster -------------------------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/rdksuite.XXXXXX")"
# Six free ports below Linux's ephemeral range (32768-60999), so that no node's
# outgoing connection takes a port another node is about to listen on.
read -r -a ports <<<"$(python3 -c '
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
print(" ".join(str(s.getsockname()[1]) for s in socks))')"
quorum="1@127.0.0.1:${ports[3]},2@127.0.0.1:${ports[4]},3@127.0.0.1:${ports[5]}"
bootstrap="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
pids=()
for i in 0 1 2; do
    "$TIDELOG_BIN" serve --data "$work/node$((i + 1))" --listen "127.0.0.1:${ports[$i]}" \
        --node-id "$((i + 1))" --quorum "$quorum" --num-partitions 4 \
        --default-replication-factor 3 "${scenario_args[@]}" >"$work/node$((i + 1)).log" 2>&1 &
    pids+=("$!")
done
status=0
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    if [ "$status" = 0 ] && [ "${RDK_KEEP_LOGS:-0}" != 1 ]; then
        rm -rf "$work"
    else
        echo "librdkafka-suite: the nodes' logs and data are in $work" >&2
    fi
}
trap cleanup EXIT

# Ready once a topic of three replicas can be made (a controller, three registered nodes).
ready=0
for _ in $(seq 1 120); do
    if "$TIDELOG_BIN" topics create rdksuite-ready --replication-factor 3 --if-not-exists \
        --bootstrap "$bootstrap" >/dev/null 2>&1; then
        ready=1
        break
    fi
    sleep 0.5
done
if [ "$ready" != 1 ]; then
    status=2
    tail -n 20 "$work"/node*.log >&2
    die "the cluster did not come up in 60 s"
fi
echo "== three tidelog nodes at $bootstrap ($(( $(date +%s) - start )) s)"

cat >"$work/test.conf" <<CONF
bootstrap.servers=$bootstrap
CONF
# The share consumer tests poll for fixed times and wait out lock durations; each test's
# time limit is set for a quick broker, and librdkafka's own CI runs them with its
# timeouts tripled (TEST_TIMEOUT_MULTIPLIER is 1 + 2 there): so here too.
if [ "$SOURCE" = npm ]; then
    echo "test.timeout.multiplier=3" >>"$work/test.conf"
fi

# --- the tests ------------------------------------------------------------------------
results=()
for entry in "${TESTS_LIST[@]}"; do
    test="${entry%%:*}"
    subtests=""
    [ "$entry" != "$test" ] && subtests="${entry#*:}"
    log="$work/$test.log"
    t0=$(date +%s)
    set +e
    (
        cd "$src/tests"
        # -E: no sockem (socket fault injection) tests, -L: no broker-less tests; CI
        # unset so that librdkafka does not skip its timing-dependent checks.
        env -u CI LD_LIBRARY_PATH="../src:../src-cpp" RDKAFKA_TEST_CONF="$work/test.conf" \
            TEST_KAFKA_VERSION="$KAFKA_VERSION" TEST_CONSUMER_GROUP_PROTOCOL="$GROUP_PROTOCOL" \
            TESTS="$test" SUBTESTS="$subtests" TEST_SCENARIO="$SCENARIO" \
            timeout "$TEST_TIMEOUT" ./test-runner -E -L -p1
    ) >"$log" 2>&1
    rc=$?
    set -e
    rm -f "$src"/tests/stats_*.json   # the runner's statistics files, one per test
    took=$(( $(date +%s) - t0 ))
    # The runner's summary table: one row per test it matched ("| NAME | PASSED | ...").
    # Broker-less variants filtered out by -L are not counted.
    summary="$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^\| [0-9]{4}_' \
        | grep -v 'negative test flags' || true)"
    skipped="$(grep SKIPPED <<<"$summary" | awk -F'|' '{gsub(/ /, "", $2); print $2 ":" $5}' \
        | paste -sd';' - || true)"
    if [ "$rc" = 0 ] && grep -q 'PASSED' <<<"$summary" && ! grep -q 'FAILED' <<<"$summary"; then
        verdict=PASS
    elif [ "$rc" = 0 ] && [ -n "$skipped" ] && ! grep -q 'FAILED' <<<"$summary"; then
        verdict=SKIP
    else
        verdict=FAIL
        status=1
    fi
    line="$(printf '%-6s %-22s %4d s' "$verdict" "$entry" "$took")"
    [ -n "$skipped" ] && line="$line  (skipped $skipped)"
    results+=("$line")
    echo "${results[-1]}"
    if [ "$verdict" = FAIL ]; then
        grep -E 'FAIL|Assert|Error|error' "$log" | head -n 15 | sed 's/^/    /' >&2 || true
        cp "$log" "$SUITE_DIR/$test.last-failure.log"
    fi
done

echo
echo "== librdkafka $RDK_VERSION tests against tidelog ($(( $(date +%s) - start )) s)"
printf '%s\n' "${results[@]}"
exit "$status"
