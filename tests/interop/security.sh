#!/usr/bin/env bash
# Security with unmodified clients: kcat, confluent-kafka and kafka-python against `tidelog serve` with
# SSL, SASL_PLAINTEXT and SASL_SSL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and
# the authorizer on. Certificates are made here with openssl (a CA and a server
# certificate for 127.0.0.1), users and ACLs with `tidelog users` / `tidelog acls`
# before the server starts.
#
# Environment: TIDELOG_BIN, PYTHON (with confluent-kafka and kafka-python), KCAT, as
# run.sh sets them.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
TIDELOG_BIN="${TIDELOG_BIN:?}"
PYTHON="${PYTHON:-python3}"
KCAT="${KCAT:-kcat}"

work="$(mktemp -d)"
data="$work/data"
log="$work/serve.log"
server=""
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -KILL "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# A CA and a server certificate for 127.0.0.1 and localhost.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 \
    -subj "/CN=tidelog interop CA" -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=localhost" -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$work/ext.cnf"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
    -CAcreateserial -days 36500 -extfile "$work/ext.cnf" -out "$work/server.pem" 2>/dev/null

# Users (salted SCRAM credentials) and ACLs, on the data directory.
"$TIDELOG_BIN" --data "$data" users add admin --password admin-secret >/dev/null
"$TIDELOG_BIN" --data "$data" users add alice --password alice-secret >/dev/null
printf 'reader-secret\n' | "$TIDELOG_BIN" --data "$data" users add reader >/dev/null
"$TIDELOG_BIN" --data "$data" acls add --allow-principal User:alice --allow-principal User:ANONYMOUS \
    --operation All --topic sec- --resource-pattern-type prefixed >/dev/null
"$TIDELOG_BIN" --data "$data" acls add --allow-principal User:alice --allow-principal User:ANONYMOUS \
    --allow-principal User:reader --operation Read --group '*' >/dev/null
"$TIDELOG_BIN" --data "$data" acls add --allow-principal User:reader --operation Read \
    --topic sec-readonly >/dev/null
"$TIDELOG_BIN" --data "$data" acls add --deny-principal User:alice --operation All \
    --topic sec-forbidden >/dev/null

port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export PLAINTEXT_BOOTSTRAP="127.0.0.1:$(port)"
export SSL_BOOTSTRAP="127.0.0.1:$(port)"
export SASL_PLAINTEXT_BOOTSTRAP="127.0.0.1:$(port)"
export SASL_SSL_BOOTSTRAP="127.0.0.1:$(port)"
export CA="$work/ca.pem"

"$TIDELOG_BIN" serve --data "$data" \
    --listen "PLAINTEXT://$PLAINTEXT_BOOTSTRAP" --listen "SSL://$SSL_BOOTSTRAP" \
    --listen "SASL_PLAINTEXT://$SASL_PLAINTEXT_BOOTSTRAP" --listen "SASL_SSL://$SASL_SSL_BOOTSTRAP" \
    --tls-cert "$work/server.pem" --tls-key "$work/server.key" \
    --authorizer --super-users User:admin >"$log" 2>&1 &
server=$!
"$PYTHON" - <<PY
import socket, sys, time
deadline = time.time() + 30
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", int("$SASL_SSL_BOOTSTRAP".split(":")[1])), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit("security: tidelog serve did not start listening")
PY

status=0
check() {
    echo "-- $1"
    if ! "${@:2}"; then
        echo "FAILED: $1" >&2
        status=1
    fi
}

ssl=(-X security.protocol=SSL -X "ssl.ca.location=$CA")
sasl() { # protocol mechanism user password
    local out=(-X "security.protocol=$1" -X "sasl.mechanisms=$2" -X "sasl.username=$3" -X "sasl.password=$4")
    if [ "$1" = SASL_SSL ]; then out+=(-X "ssl.ca.location=$CA"); fi
    printf '%s\n' "${out[@]}"
}

roundtrip() { # name bootstrap kcat-options...
    local topic="sec-$1-$$" bootstrap="$2"
    shift 2
    printf 'one\ntwo\nthree\n' | "$KCAT" -b "$bootstrap" "$@" -P -t "$topic"
    local got
    got="$("$KCAT" -b "$bootstrap" "$@" -C -t "$topic" -o beginning -e -q)"
    [ "$got" = "$(printf 'one\ntwo\nthree')" ] || { echo "kcat $topic consumed: $got" >&2; return 1; }
}
mapfile -t plain < <(sasl SASL_PLAINTEXT PLAIN alice alice-secret)
mapfile -t scram256 < <(sasl SASL_SSL SCRAM-SHA-256 alice alice-secret)
mapfile -t scram512 < <(sasl SASL_SSL SCRAM-SHA-512 alice alice-secret)
mapfile -t wrong < <(sasl SASL_SSL SCRAM-SHA-512 alice not-the-password)
check "kcat over SSL" roundtrip ssl "$SSL_BOOTSTRAP" "${ssl[@]}"
check "kcat over SASL_PLAINTEXT with PLAIN" roundtrip plain "$SASL_PLAINTEXT_BOOTSTRAP" "${plain[@]}"
check "kcat over SASL_SSL with SCRAM-SHA-256" roundtrip scram256 "$SASL_SSL_BOOTSTRAP" "${scram256[@]}"
check "kcat over SASL_SSL with SCRAM-SHA-512" roundtrip scram512 "$SASL_SSL_BOOTSTRAP" "${scram512[@]}"
wrong_password() {
    local err
    if err="$("$KCAT" -b "$SASL_SSL_BOOTSTRAP" "${wrong[@]}" -L -m 5 2>&1)"; then
        echo "kcat -L with a wrong password succeeded" >&2
        return 1
    fi
    grep -q "Authentication failed" <<<"$err" || { echo "$err" >&2; return 1; }
}
check "kcat with a wrong password fails to authenticate" wrong_password
check "confluent-kafka" "$PYTHON" "$here/confluent_kafka_security.py"
check "kafka-python" "$PYTHON" "$here/kafka_python_security.py"

kill -TERM "$server"
for _ in $(seq 300); do
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$server" 2>/dev/null || ! wait "$server"; then
    echo "FAILED: tidelog serve did not stop cleanly after SIGTERM" >&2
    status=1
fi
server=""
if [ "$status" -ne 0 ]; then
    echo "--- server log ---" >&2
    cat "$log" >&2
fi
exit "$status"
