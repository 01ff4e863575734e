#!/usr/bin/env bash
# Installs Debian packages when it can (root, or sudo without a password, and apt-get);
# otherwise says what to install and exits 0, so that the caller goes on and whatever needs
# the packages says why it cannot run. Usage: apt_install.sh WHAT-FOR PACKAGE...
set -euo pipefail
what_for="$1"
shift
say() { printf '%s: %s\n' "$what_for" "$*" >&2; }
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  say "missing $*: install them (apt-get install $*)"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "missing $* and no apt-get here: install them with your package manager"
  exit 0
fi
say "installing $* (Debian packages, once)"
export DEBIAN_FRONTEND=noninteractive
if ! "${as_root[@]}" apt-get install -y --no-install-recommends "$@" >/dev/null; then
  "${as_root[@]}" apt-get update >/dev/null
  "${as_root[@]}" apt-get install -y --no-install-recommends "$@" >/dev/null
fi
