#!/usr/bin/env python3
"""Animation benchmark (issue 17): a 100-frame 500x500 GIF fitted to 200x200, every frame kept.

Darkroom (Examples/pipelines/bench-animated.json) beside gifsicle (`--resize-fit 200x200`) and
ImageMagick (`-coalesce -resize 200x200`), in one run: each round runs every command once, in
turn, and the table shows medians over the rounds, the ratio of each peer's time to Darkroom's
(above 1: Darkroom is faster), and peak RSS. Each output is checked: 100 frames of 200x200.

The GIF is made here with Pillow (made deterministically: moving discs and a gradient over 100
frames, delays of 40 to 120 ms). usage: bench_animation.py DARKROOM_BINARY [--rounds 5]
"""
import argparse, os, shutil, statistics, sys, tempfile

from bench_memory import measured

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PIPELINE = os.path.join(ROOT, 'Examples', 'pipelines', 'bench-animated.json')
FRAMES, SIDE, BOX = 100, 500, 200


def make_gif(path):
    from PIL import Image, ImageDraw
    frames = []
    for index in range(FRAMES):
        frame = Image.new('RGB', (SIDE, SIDE))
        draw = ImageDraw.Draw(frame)
        for y in range(0, SIDE, 4):
            draw.rectangle([0, y, SIDE, y + 3], fill=(y * 255 // SIDE, (index * 7) % 256, 160))
        for disc in range(6):
            cx = (disc * 83 + index * (disc + 3) * 2) % SIDE
            cy = (disc * 131 + index * (7 - disc) * 3) % SIDE
            draw.ellipse([cx - 40, cy - 40, cx + 40, cy + 40], fill=((disc * 40) % 256, 255 - disc * 30, (index * 5) % 256))
        frames.append(frame.convert('P', palette=Image.Palette.ADAPTIVE, colors=256))
    delays = [40 + (i % 5) * 20 for i in range(FRAMES)]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=delays, loop=0, optimize=False)


def check(path):
    from PIL import Image
    with Image.open(path) as image:
        return image.n_frames, image.size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('darkroom')
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix='darkroom-anim-')
    try:
        source = os.path.join(work, 'anim.gif')
        make_gif(source)
        out = {name: os.path.join(work, name) for name in ('darkroom', 'gifsicle', 'imagemagick')}
        for folder in out.values():
            os.makedirs(folder)
        convert = shutil.which('convert-im6.q16') or shutil.which('convert')
        commands = {
            'darkroom': [args.darkroom, 'run', PIPELINE, source, '--output', out['darkroom'], '--quiet'],
            'gifsicle': ['gifsicle', '--resize-fit', f'{BOX}x{BOX}', source, '-o', os.path.join(out['gifsicle'], 'anim.gif')],
            'imagemagick': [convert, source, '-coalesce', '-resize', f'{BOX}x{BOX}', os.path.join(out['imagemagick'], 'anim.gif')],
        }
        times = {name: [] for name in commands}
        peaks = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, cmd in commands.items():
                rc, seconds, rss, err = measured(cmd)
                if rc != 0:
                    print(f'{name} failed ({rc}): {err}')
                    return 1
                times[name].append(seconds)
                peaks[name].append(rss)
        size = os.path.getsize(source)
        print(f'a {FRAMES}-frame {SIDE}x{SIDE} GIF ({size / 1e6:.1f} MB) fitted to {BOX}x{BOX}, {args.rounds} rounds, medians\n')
        print('| command | seconds | peer / darkroom | peak RSS MB | output | frames | size |')
        print('|---|---:|---:|---:|---:|---:|---|')
        base = statistics.median(times['darkroom'])
        verdicts = []
        for name in commands:
            seconds = statistics.median(times[name])
            path = os.path.join(out[name], 'anim.gif')
            frames, dims = check(path)
            ratio = seconds / base
            peak = statistics.median(peaks[name])
            print(f'| {name} | {seconds:.3f} | {ratio:.2f}x | {peak:.0f} | {os.path.getsize(path) / 1e3:.0f} KB | {frames} | '
                  f'{dims[0]}x{dims[1]} |')
            if name != 'darkroom':
                verdicts.append((name, ratio > 1, statistics.median(peaks['darkroom']) <= peak))
            elif frames != FRAMES or max(dims) != BOX:
                print(f'darkroom wrote {frames} frames of {dims}: expected {FRAMES} of {BOX} on the long side')
        print()
        for name, faster, leaner in verdicts:
            print(f'vs {name}: faster {"met" if faster else "NOT met"}, peak RSS no higher {"met" if leaner else "NOT met"}')
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
