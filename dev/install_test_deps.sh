#!/bin/sh
# Installs what `make test` needs and a fresh Debian machine lacks: PyTorch for
# the oracle (Debian's python3-torch, used only by dev/ scripts), cmake for
# CTest, node/npm for the tokenizer's reference encoder, and libstb-dev (the
# charts' stb_easy_font.h and stb_image_write.h).
set -e
missing=""
/usr/bin/python3 -c "import torch" 2>/dev/null || missing="$missing python3-torch"
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -f /usr/include/stb/stb_image_write.h ] && [ -f /usr/include/stb/stb_easy_font.h ] || missing="$missing libstb-dev"
if [ -n "$missing" ]; then
    echo "installing test dependencies:$missing"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
echo "test dependencies present: python3-torch, cmake, node, npm, libstb-dev"
