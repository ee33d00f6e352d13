#!/usr/bin/env bash
# Runs each libFuzzer harness of darkroom-fuzz for SECONDS (default 60) with its seed corpora.
# usage: scripts/fuzz.sh [SECONDS|smoke] [HARNESS...]   (build first: make fuzz-build)
# "smoke" runs a fixed number of inputs per harness with a fixed seed (deterministic; CI).
# New inputs go to .build-fuzz/corpus/<harness>; crash reproducers to .build-fuzz/crashes/.
# Leak detection is off, as in make test-asan: Swift keeps enum tags in spare pointer bits, which
# hides live references from LeakSanitizer (static option tables would be reported).
# Seeds are referenced where they are (never copied): ../shared/corpus (or $DARKROOM_CORPUS),
# Examples/, and the reproducers kept in Tests/FuzzRegressions/<harness>.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(json decode http cache imagetable disk thumbor)
binary=.build-fuzz/debug/darkroom-fuzz
[ -x "$binary" ] || { echo "build it first: make fuzz-build" >&2; exit 64; }
corpus="${DARKROOM_CORPUS:-$(cd .. && pwd)/shared/corpus}"
mkdir -p .build-fuzz/crashes .build-fuzz/seeds/http
# HTTP seeds: a few responses as a server would send them (generated, not copied).
printf 'HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: 4\r\nCache-Control: public, max-age=3600\r\nETag: "v1"\r\nLast-Modified: Sun, 22 Nov 2026 10:00:00 GMT\r\n\r\n\xff\xd8\xff\xd9' > .build-fuzz/seeds/http/ok.txt
printf 'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nCache-Control: no-cache\r\n\r\n' > .build-fuzz/seeds/http/304.txt
printf 'HTTP/1.1 503 Service Unavailable\r\nRetry-After: Sun, 22 Nov 2026 10:00:05 GMT\r\n\r\n' > .build-fuzz/seeds/http/503.txt
printf 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: image/png; charset=binary\r\nExpires: Thu, 01 Jan 1970 00:00:00 GMT\r\n\r\n\x89PNG\r\n\x1a\n' > .build-fuzz/seeds/http/continue.txt
status=0
for harness in "${harnesses[@]}"; do
  case "$harness" in
    json) seeds=(Examples/pipelines) ;;
    decode) seeds=("$corpus" Examples/images) ;;
    http) seeds=(.build-fuzz/seeds/http) ;;
    cache) seeds=(Examples/images) ;;
    imagetable) seeds=() ;;  # Tests/FuzzRegressions/imagetable holds a valid table file
    disk) seeds=(Examples/images) ;;
    thumbor) seeds=() ;;  # Tests/FuzzRegressions/thumbor holds URLs from thumbor's documentation
    *) echo "unknown harness $harness (json, decode, http, cache, imagetable, disk, thumbor)" >&2; exit 64 ;;
  esac
  [ -d "Tests/FuzzRegressions/$harness" ] && seeds+=("Tests/FuzzRegressions/$harness")
  mkdir -p ".build-fuzz/corpus/$harness"
  if [ "$seconds" = smoke ]; then
    case "$harness" in json) runs=150000 ;; decode) runs=2500 ;; http) runs=100000 ;; cache) runs=400 ;; imagetable) runs=3000 ;; disk) runs=300 ;; thumbor) runs=100000 ;; esac
    limit=(-seed=1 -runs="$runs")
    work=$(mktemp -d)  # a fresh corpus: the same inputs on every machine
  else
    limit=(-max_total_time="$seconds")
    work=".build-fuzz/corpus/$harness"
  fi
  echo "== $harness: ${limit[*]}"
  if ! ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}" DARKROOM_FUZZ_TARGET="$harness" "$binary" "${limit[@]}" -timeout=20 -rss_limit_mb=4096 \
      -max_len=65536 -detect_leaks=0 -print_final_stats=1 -artifact_prefix=".build-fuzz/crashes/$harness-" \
      "$work" "${seeds[@]}" 2> ".build-fuzz/$harness.log"; then
    status=1
    tail -40 ".build-fuzz/$harness.log" >&2
    echo "$harness: a crash; its reproducer is in .build-fuzz/crashes/ — add it to Tests/FuzzRegressions/$harness" >&2
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" ".build-fuzz/$harness.log" | tr '\n' ' '
    echo
  fi
done
exit $status
