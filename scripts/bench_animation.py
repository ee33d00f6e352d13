#!/usr/bin/env python3
"""Animation benchmark (issue 17): a 100-frame 500x500 GIF fitted to 200x200, every frame kept.

Darkroom (Examples/pipelines/bench-animated.json) beside gifsicle (`--resize-fit 200x200`) and
ImageMagick (`-coalesce -resize 200x200`), in one run: each round runs every command once, in
turn, and the table shows medians over the rounds, the ratio of each peer's time to Darkroom's
(above 1: Darkroom is faster), peak RSS, and how far each output is from the source frames resized in
RGB (Lanczos). Each output is checked: 100 frames of 200x200.

The GIF is made here with Pillow (made deterministically: moving discs and a gradient over 100
frames, delays of 40 to 120 ms). usage: bench_animation.py DARKROOM_BINARY [--rounds 5]

Peak RSS is the child's ru_maxrss from wait4. Linux keeps the parent's high-water mark in a
child that vfork()s and execs, so a command can never show less than this script's own peak:
Pillow runs in child processes (--make-gif, --check) and the script itself stays near 10 MB.
"""
import argparse, os, resource, shutil, statistics, subprocess, sys, tempfile

from bench_memory import measured

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PIPELINE = os.path.join(ROOT, 'Examples', 'pipelines', 'bench-animated.json')
FRAMES, SIDE, BOX = 100, 500, 200


def make_gif(path, count=FRAMES):
    from PIL import Image, ImageDraw
    frames = []
    for index in range(count):
        frame = Image.new('RGB', (SIDE, SIDE))
        draw = ImageDraw.Draw(frame)
        for y in range(0, SIDE, 4):
            draw.rectangle([0, y, SIDE, y + 3], fill=(y * 255 // SIDE, (index * 7) % 256, 160))
        for disc in range(6):
            cx = (disc * 83 + index * (disc + 3) * 2) % SIDE
            cy = (disc * 131 + index * (7 - disc) * 3) % SIDE
            draw.ellipse([cx - 40, cy - 40, cx + 40, cy + 40], fill=((disc * 40) % 256, 255 - disc * 30, (index * 5) % 256))
        frames.append(frame.convert('P', palette=Image.Palette.ADAPTIVE, colors=256))
    delays = [40 + (i % 5) * 20 for i in range(count)]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=delays, loop=0, optimize=False)


def check(path, source):
    """The output's frame count and size, and its mean absolute error per RGB sample (0-255)
    against the source's frames resized to the output's size in RGB by Pillow (Lanczos)."""
    from PIL import Image, ImageSequence
    import numpy
    with Image.open(path) as image, Image.open(source) as original:
        frames = [frame.convert('RGB') for frame in ImageSequence.Iterator(image)]
        size = frames[0].size
        references = [frame.convert('RGB').resize(size, Image.LANCZOS) for frame in ImageSequence.Iterator(original)]
        errors = [numpy.abs(numpy.asarray(a, dtype=int) - numpy.asarray(b, dtype=int)).mean()
                  for a, b in zip(frames, references)]
        return len(frames), size, float(numpy.mean(errors))


def scaling(work, original, commands):
    """Peak RSS and time as the animation grows: darkroom holds one frame's pipeline at a time,
    gifsicle every frame (a byte a pixel)."""
    print('Longer animations (500x500 frames, fitted to 200x200, 3 rounds, medians):\n')
    print('| frames | darkroom s | darkroom MB | gifsicle s | gifsicle MB |')
    print('|---:|---:|---:|---:|---:|')
    for frames in (150, 250):
        source = os.path.join(work, f'anim{frames}.gif')
        in_child('--make-gif', source, str(frames))
        row = []
        for name in ('darkroom', 'gifsicle'):
            cmd = [source if part == original else part for part in commands[name]]
            results = [measured(cmd) for _ in range(3)]
            if any(rc != 0 for rc, _, _, _ in results):
                print(f'{name} failed on {frames} frames: {results[0][3]}')
                return
            row += [statistics.median(r[1] for r in results), statistics.median(r[2] for r in results)]
        print(f'| {frames} | {row[0]:.3f} | {row[1]:.0f} | {row[2]:.3f} | {row[3]:.0f} |')
        os.remove(source)


def in_child(*arguments):
    """Runs this script with `arguments` in a child process (so that Pillow's memory is not this
    process's) and returns what it printed."""
    return subprocess.run([sys.executable, os.path.abspath(__file__), *arguments], check=True, capture_output=True,
                          text=True).stdout


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == '--make-gif':
        make_gif(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else FRAMES)
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == '--check':
        frames, (width, height), error = check(sys.argv[2], sys.argv[3])
        print(frames, width, height, error)
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument('darkroom')
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix='darkroom-anim-')
    try:
        source = os.path.join(work, 'anim.gif')
        in_child('--make-gif', source)
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
        print('| command | seconds | peer / darkroom | peak RSS MB | output | frames | size | error |')
        print('|---|---:|---:|---:|---:|---:|---|---:|')
        base = statistics.median(times['darkroom'])
        verdicts = []
        for name in commands:
            seconds = statistics.median(times[name])
            path = os.path.join(out[name], 'anim.gif')
            fields = in_child('--check', path, source).split()
            frames, width, height, error = int(fields[0]), int(fields[1]), int(fields[2]), float(fields[3])
            dims = (width, height)
            ratio = seconds / base
            peak = statistics.median(peaks[name])
            print(f'| {name} | {seconds:.3f} | {ratio:.2f}x | {peak:.0f} | {os.path.getsize(path) / 1e3:.0f} KB | {frames} | '
                  f'{dims[0]}x{dims[1]} | {error:.2f} |')
            if name != 'darkroom':
                verdicts.append((name, ratio > 1, statistics.median(peaks['darkroom']) <= peak))
            elif frames != FRAMES or max(dims) != BOX:
                print(f'darkroom wrote {frames} frames of {dims}: expected {FRAMES} of {BOX} on the long side')
        print('\nerror: mean absolute difference per RGB sample (0-255) from the source frames resized by Pillow '
              '(Lanczos, RGB)\n')
        for name, faster, leaner in verdicts:
            print(f'vs {name}: faster {"met" if faster else "NOT met"}, peak RSS no higher {"met" if leaner else "NOT met"}')
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f'(this script peaked at {own:.0f} MB: no command can show less)\n')
        scaling(work, source, commands)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
