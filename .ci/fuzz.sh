#!/usr/bin/env bash
# Runs each cargo-fuzz target under fuzz/ for FUZZ_SECONDS (default 30), starting from
# the committed seed corpus fuzz/corpus-seed/<target>/. Installs cargo-fuzz from
# crates.io if it is missing. cargo-fuzz needs nightly flags (-Zsanitizer): on a stable
# toolchain they are unlocked with RUSTC_BOOTSTRAP=1 (set FUZZ_TOOLCHAIN=nightly to use
# an installed nightly instead). Where fuzzing cannot be built or run here, it falls
# back to replaying the seed corpus as a regular test (tests/fuzz_corpus_replay.rs).
# When the targets do run, every fuzz run starts from that seed corpus, and the README's
# test command (all features) has already replayed it, so it is not replayed again.
#
# Exit status: 0 when no crash was found (or the fallback replay passed), 1 when a
# target crashed (the input is in fuzz/artifacts/<target>/; copy it into
# fuzz/corpus-seed/<target>/ as a regression input once fixed) or the replay failed.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-30}"
targets=(batch_decoder log_recovery request_decoder decompress sasl_session tls_handshake)
toolchain=()
if [[ -n "${FUZZ_TOOLCHAIN:-}" ]]; then
    toolchain=("+${FUZZ_TOOLCHAIN}")
else
    export RUSTC_BOOTSTRAP=1
fi

replay() {
    echo "fuzz.sh: replaying the seed corpus as a regular test"
    cargo test --features testing,server --test fuzz_corpus_replay
}

can_fuzz=1
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz"
    cargo install cargo-fuzz --locked || can_fuzz=0
fi
# The targets are built once, all together, with the dev profile (`--dev`: no
# optimization, debug assertions and overflow checks on, besides the address sanitizer):
# a release build takes minutes longer than these short runs, and the checks it drops
# are the ones a smoke run is for. Not incremental: the fuzz build starts from scratch.
fuzz_profile=(--dev)
if [[ $can_fuzz == 1 ]]; then
    if ! (cd fuzz && CARGO_INCREMENTAL=0 cargo "${toolchain[@]}" fuzz build "${fuzz_profile[@]}"); then
        echo "fuzz.sh: cannot build the fuzz targets here"
        can_fuzz=0
    fi
fi
if [[ $can_fuzz == 0 ]]; then
    echo "fuzz.sh: fuzzing cannot run here; falling back to the corpus replay"
    replay
    exit $?
fi

status=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    echo "fuzz.sh: fuzzing $t for ${seconds}s"
    if ! (cd fuzz && CARGO_INCREMENTAL=0 cargo "${toolchain[@]}" fuzz run "${fuzz_profile[@]}" "$t" "corpus/$t" "corpus-seed/$t" \
        -- -max_total_time="$seconds" -print_final_stats=1 2>&1 | tail -n 40); then
        echo "fuzz.sh: $t FOUND A CRASH; see fuzz/artifacts/$t/"
        status=1
    fi
done
exit $status
