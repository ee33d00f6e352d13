#!/usr/bin/env python3
"""Quality beside speed (issue 18): does Darkroom's thumbnail lose anything to libvips' own?

For each photo of a benchmark case, three thumbnails of the same size are made:
  reference  libvips' lossless thumbnail: `vips thumbnail` (Lanczos-3) written as PNG;
  libvips    libvips' own JPEG q80 thumbnail: the same, written as JPEG q80;
  darkroom   Darkroom's output with the case's pipeline (JPEG q80).
Each JPEG is compared with the reference by the mean SSIM on luma (Wang et al. 2004: 11x11
Gaussian window, sigma 1.5, K1 0.01, K2 0.03, BT.601 luma). The goal holds where Darkroom is at
most 0.02 below libvips' own thumbnail on every photo.

usage: bench_quality.py DARKROOM_BINARY [--case A|B|H ...] [--limit 0.02]
Needs the bench images (../shared/bench/make-benchset.sh, run here), `vips` (libvips-tools),
numpy and Pillow. Exits 0 when the goal holds on every case, 1 when it does not.
"""
import argparse, os, shutil, subprocess, sys, tempfile

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, '..', 'shared')
BENCH = os.environ.get('DARKROOM_BENCH_DIR', '/tmp/darkroom-bench')
PIPELINES = os.path.join(ROOT, 'Examples', 'pipelines')

# case: (folder, how many photos, width, height, vips thumbnail options, pipeline)
CASES = {
    'A': ('set50', 50, 300, 300, [], 'bench-fit.json'),
    'B': ('sharp100', 1, 720, 588, ['--crop', 'centre'], 'bench-fill.json'),
    'H': ('huge', 1, 300, 300, [], 'bench-fit.json'),
}


def luma(path):
    """BT.601 luma of an image file as float64, the way JPEG defines Y."""
    rgb = np.asarray(Image.open(path).convert('RGB'), dtype=np.float64)
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def gaussian_filter(plane, taps):
    """Separable 'valid' filtering with a 1-D kernel."""
    n = len(taps)
    rows = sum(taps[i] * plane[i:plane.shape[0] - n + 1 + i, :] for i in range(n))
    return sum(taps[i] * rows[:, i:rows.shape[1] - n + 1 + i] for i in range(n))


def ssim(a, b):
    """Mean SSIM of two luma planes of the same shape (8-bit range)."""
    x = np.arange(11) - 5
    taps = np.exp(-(x * x) / (2 * 1.5 * 1.5))
    taps /= taps.sum()
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mu_a, mu_b = gaussian_filter(a, taps), gaussian_filter(b, taps)
    var_a = gaussian_filter(a * a, taps) - mu_a * mu_a
    var_b = gaussian_filter(b * b, taps) - mu_b * mu_b
    cov = gaussian_filter(a * b, taps) - mu_a * mu_b
    index = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a * mu_a + mu_b * mu_b + c1) * (var_a + var_b + c2))
    return float(index.mean())


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode != 0:
        sys.exit(f'failed ({done.returncode}): {" ".join(cmd)}\n{done.stderr.decode(errors="replace")[-500:]}')


def measure(darkroom, case, work):
    folder, count, width, height, options, pipeline = CASES[case]
    photos = sorted(n for n in os.listdir(os.path.join(BENCH, folder)) if n.endswith('.jpg'))[:count]
    inputs = os.path.join(work, 'in')
    os.makedirs(inputs)
    for name in photos:
        os.symlink(os.path.join(BENCH, folder, name), os.path.join(inputs, name))
    out = os.path.join(work, 'darkroom')
    run([darkroom, 'run', os.path.join(PIPELINES, pipeline), inputs, '--output', out, '--quiet'])
    rows = []
    for name in photos:
        stem = os.path.splitext(name)[0]
        source = os.path.join(inputs, name)
        reference = os.path.join(work, stem + '.ref.png')
        own = os.path.join(work, stem + '.vips.jpg')
        run(['vips', 'thumbnail', source, reference, str(width), '--height', str(height)] + options)
        run(['vips', 'thumbnail', source, own + '[Q=80,strip]', str(width), '--height', str(height)] + options)
        ref = luma(reference)
        mine = luma(os.path.join(out, stem + '.jpg'))
        theirs = luma(own)
        if mine.shape != ref.shape:
            rows.append((stem, f'{mine.shape[1]}x{mine.shape[0]} (libvips {ref.shape[1]}x{ref.shape[0]})', None, None))
            continue
        rows.append((stem, f'{ref.shape[1]}x{ref.shape[0]}', ssim(mine, ref), ssim(theirs, ref)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('darkroom')
    parser.add_argument('--case', action='append', choices=sorted(CASES))
    parser.add_argument('--limit', type=float, default=0.02)
    parser.add_argument('--all-rows', action='store_true', help='print every photo, not only the worst five')
    args = parser.parse_args()
    if shutil.which('vips') is None:
        sys.exit('needs vips (apt-get install libvips-tools)')
    verdicts = []
    for case in args.case or ['A', 'B', 'H']:
        with tempfile.TemporaryDirectory(prefix='darkroom-quality-') as work:
            rows = measure(os.path.abspath(args.darkroom), case, work)
        folder, count, width, height, options, pipeline = CASES[case]
        print(f'\nquality, case {case}: {len(rows)} photo(s) -> {width}x{height}'
              f'{" fill" if options else " fit"}, mean SSIM on luma against libvips\' lossless thumbnail')
        print('\n| photo | size | darkroom | libvips q80 | darkroom - libvips |')
        print('|---|---|---:|---:|---:|')
        measured = sorted((r for r in rows if r[2] is not None), key=lambda r: r[2] - r[3])
        shown = measured if args.all_rows else measured[:5]
        for stem, size, mine, theirs in shown:
            print(f'| {stem} | {size} | {mine:.4f} | {theirs:.4f} | {mine - theirs:+.4f} |')
        mismatched = [r for r in rows if r[2] is None]
        for stem, size, _, _ in mismatched:
            print(f'| {stem} | {size} | size differs | | |')
        worst = min((r[2] - r[3] for r in measured), default=0.0)
        mean_mine = sum(r[2] for r in measured) / max(1, len(measured))
        mean_theirs = sum(r[3] for r in measured) / max(1, len(measured))
        ok = not mismatched and worst >= -args.limit
        verdicts.append(ok)
        print(f'\ncase {case}: mean SSIM darkroom {mean_mine:.4f}, libvips q80 {mean_theirs:.4f}; '
              f'worst photo {worst:+.4f} (goal: at least -{args.limit}): {"met" if ok else "NOT met"}')
    sys.exit(0 if all(verdicts) else 1)


if __name__ == '__main__':
    main()
