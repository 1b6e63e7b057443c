#!/usr/bin/env bash
# Regenerate data/corpus/ (the loss study's packed corpus) from Debian's linux-source-6.1 package:
# apt-get download (nothing installed system-wide), dpkg-deb -x into a scratch folder, then
# train/make_corpus.py (selection rule, split and packing: its docstring). About 7 minutes on 2 cores,
# most of it xz at preset 9. The package's version and sha256 go into the manifest; a different
# version in the archive gives a different corpus (data/corpus/README.md records the one packed).
# Usage: bash tools/make_corpus.sh [extra train/make_corpus.py args]
set -euo pipefail
cd "$(dirname "$0")/.."
PKG=${PKG:-linux-source-6.1}
PY=${PYTHON:-python3}
scratch=$(mktemp -d /tmp/nibble-make-corpus.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && apt-get download "$PKG" >/dev/null)
deb=$(ls "$scratch"/*.deb)
dpkg-deb -x "$deb" "$scratch/x"
tar=$(ls "$scratch"/x/usr/src/linux-source-*.tar.xz)
"$PY" train/make_corpus.py --tar "$tar" --package "$PKG" --version "$(dpkg-deb -f "$deb" Version)" \
  --deb-sha256 "$(sha256sum "$deb" | cut -d' ' -f1)" --out data/corpus "$@"
