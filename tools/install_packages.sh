#!/usr/bin/env bash
# Installs the named Debian packages that are missing (apt-get, with sudo when not root); nothing when all are
# there. Usage: bash tools/install_packages.sh PKG...
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || { echo "install_packages: missing ${missing[*]} and no apt-get" >&2; exit 1; }
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
