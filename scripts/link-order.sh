#!/usr/bin/env bash
# Writes a symbol ordering file for the release runner: the functions a typical run executes, so
# the linker can put them next to each other (lld --symbol-ordering-file).
#
#   scripts/link-order.sh DARKROOM_BINARY ORDER_FILE
#
# Why: the kernel maps executable pages 64 KB at a time around each page fault ("fault-around").
# The ~1.2 MB of code a run executes lies scattered over 20 MB of text, so about 10 MB of it ends
# up resident; grouped, case H peak RSS drops by ~4 MB (Docs/Performance.md#the-runners-own-pages).
#
# How: runs the runner under valgrind's callgrind (which records every function executed) on the
# bundled example pipelines and images (small and >= 1 MiB files, PNG, JPEG, WebP, crop, fill,
# variants, a disk cache written then read, an HTTP fetch from a loopback server, and `darkroom
# serve` answering renders, hits and its operations routes), then keeps the
# names of the functions defined in the binary. Needs valgrind (scripts/install-deps.sh --profile);
# fails without it. Everything runs offline.
set -euo pipefail
binary=$1
order=$2
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v valgrind >/dev/null || { echo "link-order: valgrind not found" >&2; exit 1; }
work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# valgrind cannot read the DWARF 5 debug information of this toolchain; the symbol table is enough.
strip --strip-debug -o "$work/darkroom" "$binary"
mkdir -p "$work/images" "$work/out" "$work/profiles"
cp "$root"/Examples/images/*.{jpg,png,webp} "$work/images/"

profile() {  # profile NAME [run|validate] ARGS...: one run of the runner under callgrind
  local name=$1
  shift
  # Work runs ~50x slower under callgrind: lift the 60 s operation limit for runs.
  [ "$1" = run ] && set -- "$@" --timeout 3600
  # libvips' run-time generated (orc) code crashes under valgrind; its C paths run the same Swift.
  VIPS_NOVECTOR=1 valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/profiles/$name.out" \
    "$work/darkroom" "$@" >/dev/null 2>&1 || {
    echo "link-order: the profiled run '$name' failed" >&2
    exit 1
  }
}

# A JPEG of more than 1 MiB, which the runner decodes from the file rather than from memory.
cat >"$work/large.json" <<'JSON'
{ "version": 1, "name": "large", "stages": [
  { "stage": "fetch" }, { "stage": "decode" },
  { "stage": "resize", "width": 4000, "height": 4000, "mode": "fit" },
  { "stage": "encode", "format": "jpeg", "quality": 97 },
  { "stage": "write", "template": "large.jpg" } ] }
JSON
"$work/darkroom" run "$work/large.json" "$work/images/dunes.jpg" --output "$work/images" --quiet

profile fit run "$root/Examples/pipelines/bench-fit.json" "$work/images" --output "$work/out" --quiet
profile fill run "$root/Examples/pipelines/bench-fill.json" "$work/images" --output "$work/out" --quiet
profile avatar run "$root/Examples/pipelines/avatar.json" "$work/images" --output "$work/out" --quiet
profile sizes run "$root/Examples/pipelines/avatar-sizes.json" "$work/images" --output "$work/out" --quiet
for pass in store hit; do
  profile "cache-$pass" run "$root/Examples/pipelines/cached-thumbnail.json" "$work/images" \
    --output "$work/out" --cache-dir "$work/cache" --quiet
done
profile validate validate "$root"/Examples/pipelines/*.json

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/images" >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 50); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
  sleep 0.1
done
profile http run "$root/Examples/pipelines/bench-http-thumb.json" "http://127.0.0.1:$port/dunes.jpg" \
  "http://127.0.0.1:$port/rings.png" --output "$work/out" --quiet

# The image server: start-up, renders (JPEG and WebP from the origin, PNG), a hit answered on the
# connection, a 304, HEAD, an error, the operations routes, and a graceful shutdown (SIGTERM).
serve_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/serve.json" <<JSON
{ "privateHosts": ["127.0.0.1"], "origin": "http://127.0.0.1:$port/", "timeout": 600 }
JSON
VIPS_NOVECTOR=1 valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/profiles/serve.out" \
  "$work/darkroom" serve --config "$work/serve.json" --bind "127.0.0.1:$serve_port" --allow-unsafe \
  --log-level warning >/dev/null 2>&1 &
serve_pid=$!
for _ in $(seq 600); do
  curl -sf -o /dev/null --max-time 5 "http://127.0.0.1:$serve_port/healthz" && break
  sleep 0.2
done
base="http://127.0.0.1:$serve_port"
for request in "/unsafe/fit-in/100x100/dunes.jpg" "/unsafe/fit-in/100x100/dunes.jpg" \
  "/unsafe/50x50/filters:format(png)/rings.png" "/unsafe/fit-in/80x80/filters:nope()/dunes.jpg" "/metrics" "/readyz"; do
  curl -s -o /dev/null --max-time 300 -H 'Accept: image/webp' "$base$request" || true
done
etag=$(curl -s -D - -o /dev/null --max-time 300 -H 'Accept: image/webp' "$base/unsafe/fit-in/100x100/dunes.jpg" |
  tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
curl -s -o /dev/null --max-time 300 -H 'Accept: image/webp' -H "If-None-Match: $etag" "$base/unsafe/fit-in/100x100/dunes.jpg" || true
curl -s -o /dev/null --max-time 300 -I "$base/unsafe/fit-in/100x100/dunes.jpg" || true
kill -TERM "$serve_pid"
wait "$serve_pid" || true
[ -s "$work/profiles/serve.out" ] || { echo "link-order: the profiled server wrote no profile" >&2; exit 1; }

# The benchmarked runs first (a fit, then a fill: cases A, B and H), so that the code one local
# run executes lies together at the start, and the pages fault-around maps hold little else; the
# other runs' functions (caches, HTTP, the server, validate) follow.
python3 - "$work/darkroom" "$order" "$work"/profiles/fit.out "$work"/profiles/fill.out "$work"/profiles/*.out <<'PY'
import re, subprocess, sys
binary, order, profiles = sys.argv[1], sys.argv[2], sys.argv[3:]
defined = set()
for line in subprocess.run(['nm', '--defined-only', binary], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in 'tTwW':
        defined.add(parts[2])
names = {}  # in the order first executed (a dict keeps insertion order)
for path in profiles:  # callgrind names each function once, the first time: "fn=(id) name"
    for line in open(path, errors='replace'):
        m = re.match(r'^c?fn=\(\d+\) (.+)$', line.rstrip('\n'))
        if m and m.group(1) in defined:
            names.setdefault(m.group(1))
with open(order, 'w') as f:
    f.write(''.join(n + '\n' for n in names))
print(f'link-order: {len(names)} functions executed by the profiled runs')
PY
