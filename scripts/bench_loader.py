#!/usr/bin/env python3
"""Loader benchmark: 1,000 loads over 100 distinct URLs (nginx on 127.0.0.1) with 10x duplication,
coalescing on vs off, rounds interleaved; then cached-hit latency while the CPU class is
saturated with large decodes (target p99 < 20 ms).

usage: bench_loader.py DARKROOM_BENCH_BINARY [--rounds N]
Needs nginx (scripts/install-deps.sh --bench) and the case A photos built by
../shared/bench/make-benchset.sh into $DARKROOM_BENCH_DIR (default /tmp/darkroom-bench).
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH = os.environ.get('DARKROOM_BENCH_DIR', '/tmp/darkroom-bench')
sys.path.insert(0, HERE)
from bench_http import free_port, start_nginx, stop_nginx  # noqa: E402


def bench(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('bench')
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    subprocess.run(['bash', os.path.join(ROOT, '..', 'shared', 'bench', 'make-benchset.sh'), BENCH], check=True,
                   stdout=subprocess.DEVNULL)
    photos = os.path.join(BENCH, 'set50')
    names = sorted(n for n in os.listdir(photos) if n.endswith('.jpg'))
    work = tempfile.mkdtemp(prefix='darkroom-loader-bench-')
    served = os.path.join(work, 'served')
    os.makedirs(served)
    os.chmod(work, 0o755)
    os.chmod(served, 0o755)
    for i in range(100):  # 100 distinct URLs over the 50 photos
        os.link(os.path.join(photos, names[i % len(names)]), os.path.join(served, f'img{i:03d}.jpg'))
    port = free_port()
    prefix = start_nginx(served, port)
    try:
        urls = os.path.join(work, 'urls.txt')
        with open(urls, 'w') as f:
            f.write('\n'.join(f'http://127.0.0.1:{port}/img{i:03d}.jpg' for i in range(100)) + '\n')
        results = {'on': [], 'off': []}
        bench(a.bench, 'loader', urls, '10', 'on')  # warm-up
        for r in range(a.rounds):
            for mode in (['on', 'off'] if r % 2 == 0 else ['off', 'on']):
                results[mode].append(bench(a.bench, 'loader', urls, '10', mode))
        print('1,000 loads (100 distinct URLs x 10, all in flight at once; fetch -> decode -> 300x300 -> JPEG), '
              f'nginx on 127.0.0.1, {a.rounds} rounds, medians\n')
        print('| coalescing | seconds | loads/s | transfers | decodes | failed |')
        print('|---|---:|---:|---:|---:|---:|')
        medians = {}
        for mode in ('on', 'off'):
            rows = results[mode]
            seconds = statistics.median(x['seconds'] for x in rows)
            medians[mode] = seconds
            last = rows[-1]
            print(f"| {mode} | {seconds:.2f} | {1000 / seconds:.0f} | {last['transfers']} | {last['decodes']} | {last['failed']} |")
        print(f"\ncoalescing on is {medians['off'] / medians['on']:.1f}x faster than off\n")
    finally:
        stop_nginx(prefix)
        shutil.rmtree(work, ignore_errors=True)
    sat = bench(a.bench, 'saturated', photos, '500')
    print('Cached hits through the loader while the CPU class is saturated by full-size decodes '
          f"({sat['cpu_limit']} slots, up to {sat['cpu_queue_max']} queued; {sat['heavy_done']} heavy loads done meanwhile)\n")
    print('| hits | p50 | p99 | max | target |')
    print('|---:|---:|---:|---:|---|')
    print(f"| {sat['hits']} | {sat['p50_ms']:.2f} ms | {sat['p99_ms']:.2f} ms | {sat['max_ms']:.2f} ms | p99 < 20 ms: "
          f"{'met' if sat['p99_ms'] < 20 else 'MISSED'} |")


if __name__ == '__main__':
    main()
