#!/usr/bin/env bash
# Debian/Ubuntu packages MuJoCo needs to render offscreen without a GPU or a display
# (EGL and OSMesa from Mesa, software rasteriser). Installs only what is missing; safe to re-run.
set -euo pipefail

packages=(libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 libosmesa6)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_system_deps: no apt-get here; install the EGL/OSMesa libraries of your OS (Mesa) for headless MuJoCo rendering: ${missing[*]}" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install_system_deps: need root to install: ${missing[*]} (run: apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
fi
echo "install_system_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
