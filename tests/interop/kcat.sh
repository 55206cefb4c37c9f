#!/usr/bin/env bash
# kcat: metadata (-L), produce (-P), consume from the beginning until the end (-C -o beginning -e).
set -euo pipefail
KCAT="${KCAT:-kcat}"
topic="kcat-$$"

meta="$("$KCAT" -b "$BOOTSTRAP" -L)"
echo "$meta"
grep -q "1 brokers" <<<"$meta"

printf 'one\ntwo\nthree\n' | "$KCAT" -b "$BOOTSTRAP" -P -t "$topic"
printf 'k1:four\nk2:five\n' | "$KCAT" -b "$BOOTSTRAP" -P -t "$topic" -K:

got="$("$KCAT" -b "$BOOTSTRAP" -C -t "$topic" -o beginning -e -q -f '%k=%s\n')"
expected="$(printf '=one\n=two\n=three\nk1=four\nk2=five')"
if [ "$got" != "$expected" ]; then
    echo "kcat consumed:" >&2
    echo "$got" >&2
    exit 1
fi
meta="$("$KCAT" -b "$BOOTSTRAP" -L -t "$topic")"
grep -q "topic \"$topic\" with 1 partitions" <<<"$meta"
echo "kcat: ok"
