#!/usr/bin/env bash
# Installs the Debian packages Darkroom needs, when they are missing.
#   scripts/install-deps.sh           build and test dependencies (libvips-dev, libcurl4-openssl-dev,
#                                     libjpeg-dev for the direct JPEG path (libjpeg-turbo; libvips-dev
#                                     brings it too), libsqlite3-dev for the disk cache index, zlib1g-dev for checksums,
#                                     postgresql for the queue's tests, which start their own server,
#                                     iproute2 for their test hosts in network namespaces, chromium
#                                     for the runner's HTML report tests, which open it headless)
#   scripts/install-deps.sh --bench   plus the benchmark peers (libvips-tools, imagemagick, gifsicle, Pillow; nginx,
#                                     wrk and python3-venv for bench_serve.py, which puts thumbor in a venv)
#   scripts/install-deps.sh --profile plus valgrind (scripts/link-order.sh profiles the release runner)
set -euo pipefail
packages=()
pkg-config --exists vips 2>/dev/null || packages+=(libvips-dev)
pkg-config --exists libcurl 2>/dev/null || packages+=(libcurl4-openssl-dev)
pkg-config --exists sqlite3 2>/dev/null || packages+=(libsqlite3-dev)
pkg-config --exists zlib 2>/dev/null || packages+=(zlib1g-dev)
pkg-config --exists libjpeg 2>/dev/null || packages+=(libjpeg-dev)
command -v pkg-config >/dev/null || packages+=(pkg-config)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || packages+=(postgresql)
command -v chromium >/dev/null || packages+=(chromium)
[ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || [ -x /usr/bin/ip ] || [ -x /bin/ip ] || packages+=(iproute2)
if [ "${1:-}" = "--profile" ]; then
  command -v valgrind >/dev/null || packages+=(valgrind)
fi
if [ "${1:-}" = "--bench" ]; then
  command -v vipsthumbnail >/dev/null || packages+=(libvips-tools)
  [ -x /usr/bin/convert-im6.q16 ] || [ -x /usr/bin/convert ] && /usr/bin/convert -version 2>/dev/null | grep -q ImageMagick || packages+=(imagemagick)
  command -v nginx >/dev/null || packages+=(nginx-light)
  command -v curl >/dev/null || packages+=(curl)
  command -v wrk >/dev/null || packages+=(wrk)
  command -v gifsicle >/dev/null || packages+=(gifsicle)
  python3 -c 'import venv, ensurepip' 2>/dev/null || packages+=(python3-venv)
fi
if [ ${#packages[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${packages[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
fi
if [ "${1:-}" = "--bench" ]; then
  python3 -c 'import PIL' 2>/dev/null || python3 -m pip install -q pillow || echo "Pillow unavailable: the pillow peer will be skipped"
  python3 -c 'import numpy' 2>/dev/null || python3 -m pip install -q numpy || echo "numpy unavailable: bench_animation.py cannot measure its error column"
fi
