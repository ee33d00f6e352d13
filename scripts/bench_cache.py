#!/usr/bin/env python3
"""Cache benchmark: a first and a second `darkroom run` over case A (50 photos -> 300x300) with a
disk cache, rounds interleaved, and darkroom-bench's hit latencies per store.

usage: bench_cache.py DARKROOM_BINARY DARKROOM_BENCH_BINARY [--rounds N]
Needs the case A photos built by ../shared/bench/make-benchset.sh into $DARKROOM_BENCH_DIR
(default /tmp/darkroom-bench).
"""
import argparse, os, resource, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH = os.environ.get('DARKROOM_BENCH_DIR', '/tmp/darkroom-bench')
PIPELINE = os.path.join(ROOT, 'Examples', 'pipelines', 'bench-fit-cached.json')


def timed(command):
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('darkroom')
    parser.add_argument('bench')
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args()
    shared = os.path.join(ROOT, '..', 'shared', 'bench', 'make-benchset.sh')
    subprocess.run(['bash', shared, BENCH], check=True, stdout=subprocess.DEVNULL)
    photos = os.path.join(BENCH, 'set50')
    count = len([f for f in os.listdir(photos) if f.endswith('.jpg')])
    firsts, seconds = [], []
    # Every round's files are removed after the last round, not after each: on an ext4 without a
    # journal, creating a file scans past every inode freed in the last 30 s (the kernel's
    # recently_deleted), so a round that follows the deletion of the one before timed the file
    # system's allocator more than Darkroom (50 files took 25-44 ms instead of 3.5 in C).
    works = []
    try:
        for _ in range(args.rounds):
            work = tempfile.mkdtemp(prefix='darkroom-bench-cache-')
            works.append(work)
            run = [args.darkroom, 'run', PIPELINE, photos, '--cache-dir', work, '--quiet', '--output']
            firsts.append(timed(run + [os.path.join(work, 'out1')]))
            seconds.append(timed(run + [os.path.join(work, 'out2')]))
    finally:
        for work in works:
            shutil.rmtree(work, ignore_errors=True)
    first, second = statistics.median(firsts), statistics.median(seconds)
    print(f'\n## Disk cache: case A twice ({count} photos -> 300x300, medians of {args.rounds} rounds)\n')
    print('| run | time | images/s |')
    print('|---|---|---|')
    print(f'| first (empty cache: decode, resize, encode, store) | {first:.3f} s | {count / first:.0f} |')
    print(f'| second (every image a disk hit) | {second:.3f} s | {count / second:.0f} |')
    print(f'| speed-up | {first / second:.1f}x | target >= 10x |')
    sample = sorted(os.path.join(photos, f) for f in os.listdir(photos) if f.endswith('.jpg'))[0]
    print(f'\n## Hit latency per store ({os.path.basename(sample)}, darkroom-bench)\n')
    sys.stdout.flush()
    subprocess.run([args.bench, sample, '2000'], check=True)


if __name__ == '__main__':
    main()
