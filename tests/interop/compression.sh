#!/usr/bin/env bash
# Compressed batches across tidelog and librdkafka (kcat), one codec at a time:
#   1. `tidelog produce -z CODEC` (tidelog's own encoder, BatchBuilder::compression, the
#      one the in-process Producer uses) writes records; `tidelog dump` shows the codec;
#   2. a `tidelog serve` on that data directory serves them and kcat consumes them;
#   3. kcat produces zstd (librdkafka 2.0.2 compresses only zstd against a broker without
#      Produce v0), and after the server stops `tidelog consume` decodes it in process.
# Needs TIDELOG_BIN, PYTHON (for a free port) and kcat, as run.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
TIDELOG_BIN="${TIDELOG_BIN:-$root/target/debug/tidelog}"
PYTHON="${PYTHON:-python3}"
KCAT="${KCAT:-kcat}"
codecs=(gzip snappy lz4 zstd)

data="$(mktemp -d)"
server=""
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -KILL "$server" || true; fi
    rm -rf "$data"
}
trap cleanup EXIT

expected() { # the records of codec $1, as kcat -f '%k=%s\n' prints them
    for i in $(seq 1 50); do echo "key-$((i % 7))=$1 record $i, repeated repeated repeated"; done
}

for codec in "${codecs[@]}"; do
    "$TIDELOG_BIN" --data "$data" topics create "z-$codec" --partitions 1 >/dev/null
    expected "$codec" | sed 's/=/:/' | "$TIDELOG_BIN" --data "$data" produce "z-$codec" -K : -z "$codec" 2>/dev/null
    "$TIDELOG_BIN" dump "$data/z-$codec-0/00000000000000000000.log" | grep -q "compresscodec: $codec" \
        || { echo "compression: z-$codec was not stored as $codec" >&2; exit 1; }
done

port="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
bootstrap="127.0.0.1:$port"
"$TIDELOG_BIN" serve --data "$data" --listen "$bootstrap" 2>/dev/null &
server=$!
for _ in $(seq 300); do
    "$KCAT" -b "$bootstrap" -L -m 1 >/dev/null 2>&1 && break
    sleep 0.1
done

for codec in "${codecs[@]}"; do
    got="$("$KCAT" -b "$bootstrap" -C -t "z-$codec" -o beginning -e -q -f '%k=%s\n')"
    if [ "$got" != "$(expected "$codec")" ]; then
        echo "compression: kcat read from z-$codec:" >&2
        echo "$got" >&2
        exit 1
    fi
    echo "compression: tidelog $codec -> kcat: ok"
done

expected zstd | sed 's/=/:/' | "$KCAT" -b "$bootstrap" -P -t kcat-zstd -z zstd -K :
kill -TERM "$server"
wait "$server"
server=""
"$TIDELOG_BIN" dump "$data/kcat-zstd-0/00000000000000000000.log" | grep -q "compresscodec: zstd" \
    || { echo "compression: kcat's zstd batch was not stored compressed" >&2; exit 1; }
got="$("$TIDELOG_BIN" --data "$data" consume kcat-zstd --from-beginning -e -f '%k=%s\n')"
if [ "$got" != "$(expected zstd)" ]; then
    echo "compression: tidelog consume read from kcat-zstd:" >&2
    echo "$got" >&2
    exit 1
fi
echo "compression: kcat zstd -> tidelog consume: ok"
