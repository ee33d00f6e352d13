#!/usr/bin/env python3
"""Queue benchmark (issue 16): the shared PostgreSQL queue against `darkroom run`, rounds
interleaved, medians.

  1. The queue's own cost per job: a fetch-only pipeline over 2,000 tiny PNGs, `run --queue`
     (enqueue, claim, complete, download) against `run`; (queue - run) / jobs.  Goal <= 2 ms.
  2. Two workers with one job slot each against one worker, on case A (the 50 photos under 4
     names each: 200 jobs), from the workers' start to the batch's end.  Goal >= 1.7x.  Beside
     it, the machine's own ceiling for two renders at once: `darkroom run --jobs 2` against
     `--jobs 1` on the same 200 images, without a queue.
  3. Case A x4 (200 jobs) through the queue on one machine (`run --queue`) against `run`.  Goal
     >= 0.9x.  Case A itself (50 jobs, 0.4 s) is shown beside it: at that size the connection,
     the enqueue and the download are most of the difference.

Every database is made ready with `darkroom queue init` before it is timed (once per database
in real use).

A PostgreSQL cluster of its own is started in a temporary folder (Unix socket only, default
durability settings: every completion is flushed to disk), as the `postgres` user when root.

usage: bench_queue.py DARKROOM_BINARY [--rounds N]
Needs the case A photos built by ../shared/bench/make-benchset.sh into $DARKROOM_BENCH_DIR
(default /tmp/darkroom-bench) and Debian's postgresql package.
"""
import argparse, glob, os, shutil, statistics, subprocess, sys, tempfile, time, zlib, struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH = os.environ.get('DARKROOM_BENCH_DIR', '/tmp/darkroom-bench')
FIT = os.path.join(ROOT, 'Examples', 'pipelines', 'bench-fit.json')


class Postgres:
    """A throwaway PostgreSQL cluster listening on a Unix socket in `folder`."""

    def __init__(self, folder):
        found = sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'))
        if not found:
            sys.exit('bench_queue: PostgreSQL is not installed (apt-get install postgresql)')
        self.bin = os.path.dirname(found[-1])
        self.folder = folder
        self.data = os.path.join(folder, 'data')
        self.sockets = os.path.join(folder, 'sockets')
        os.makedirs(self.sockets)
        self.prefix = []
        if os.geteuid() == 0:
            shutil.chown(folder, 'postgres')
            shutil.chown(self.sockets, 'postgres')
            self.prefix = ['setpriv', '--reuid=postgres', '--regid=postgres', '--init-groups']
        self.run('initdb', '-D', self.data, '-U', 'darkroom', '-A', 'trust', '-E', 'UTF8', '--locale=C')
        self.run('pg_ctl', '-D', self.data, '-w', '-l', os.path.join(folder, 'server.log'), '-o',
                 f"-c listen_addresses='' -k {self.sockets}", 'start')

    def run(self, program, *arguments):
        subprocess.run(self.prefix + [os.path.join(self.bin, program), *arguments], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def url(self, database='postgres'):
        return f'postgres://darkroom@/{database}?host={self.sockets}'

    def fresh(self, name):
        """A new empty database: every measurement starts from empty tables."""
        subprocess.run([os.path.join(self.bin, 'createdb'), '-h', self.sockets, '-U', 'darkroom', name], check=True)
        return self.url(name)

    def scalar(self, database, query):
        """One number from a query on `database`."""
        out = subprocess.run([os.path.join(self.bin, 'psql'), '-h', self.sockets, '-U', 'darkroom', '-d', database,
                              '-Atc', query], check=True, capture_output=True, text=True).stdout
        return float(out.strip())

    def stop(self):
        self.run('pg_ctl', '-D', self.data, '-m', 'fast', '-w', 'stop')


def tiny_png(path):
    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
    raw = zlib.compress(b'\x00\x80\x40\x20')
    with open(path, 'wb') as f:
        f.write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0))
                + chunk(b'IDAT', raw) + chunk(b'IEND', b''))


def farm(source_files, count, into):
    os.makedirs(into)
    for i in range(count):
        source = source_files[i % len(source_files)]
        os.link(source, os.path.join(into, f'p{i:05d}' + os.path.splitext(source)[1]))


def timed(command, **kwargs):
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - start


def workers(darkroom, database, name, count):
    """Starts `count` workers with one job slot each; seconds from their start to the batch's last
    completion, as the ledger dates it (the same clock: PostgreSQL runs on this machine). Not to
    the workers' exit: an idle worker with --exit-when-idle looks for work every 200 ms, and that
    wait for the other worker's last job is no part of the batch's time."""
    start = time.time()
    procs = [subprocess.Popen([darkroom, 'worker', '--queue', database.url(name), '--jobs', '1', '--exit-when-idle'],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(count)]
    for p in procs:
        if p.wait() != 0:
            sys.exit(f'bench_queue: a worker exited with {p.returncode}')
    return database.scalar(name, "SELECT extract(epoch FROM max(at)) FROM darkroom_ledger WHERE event = 'done'") - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('darkroom')
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args()
    shared = os.path.join(ROOT, '..', 'shared', 'bench', 'make-benchset.sh')
    subprocess.run(['bash', shared, BENCH], check=True, stdout=subprocess.DEVNULL)
    photos = sorted(glob.glob(os.path.join(BENCH, 'set50', '*.jpg')))
    work = tempfile.mkdtemp(prefix='darkroom-bench-queue-')
    os.chmod(work, 0o755)  # the postgres user walks into it
    database = None
    try:
        database = Postgres(os.path.join(work, 'pg'))
        png = os.path.join(work, 'tiny.png')
        tiny_png(png)
        tiny = os.path.join(work, 'tiny')
        farm([png], 2000, tiny)
        fetch = os.path.join(work, 'fetch.json')
        with open(fetch, 'w') as f:
            f.write('{"version": 1, "name": "fetch", "stages": [{"stage": "fetch"}]}')
        case_a = os.path.join(work, 'case-a')
        farm(photos, 200, case_a)
        plain_tiny, queued_tiny, one, two, plain_a, queued_a, plain_a4, queued_a4 = [], [], [], [], [], [], [], []
        single_a4 = []
        def ready(name):
            """A fresh database with the queue's tables made (`darkroom queue init`, once per
            database in real use): the timings are a batch's, not the schema's creation."""
            url = database.fresh(name)
            subprocess.run([args.darkroom, 'queue', 'init', '--queue', url], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            return url

        for r in range(args.rounds):
            out = lambda name: os.path.join(work, f'out-{name}-{r}')
            plain_tiny.append(timed([args.darkroom, 'run', fetch, tiny, '--quiet', '-o', out('pt')]))
            queued_tiny.append(timed([args.darkroom, 'run', fetch, tiny, '--quiet', '-o', out('qt'),
                                      '--queue', ready(f'qt{r}')]))
            for n, into in ((1, one), (2, two)):
                url = ready(f'w{n}r{r}')
                timed([args.darkroom, 'enqueue', FIT, case_a, '--queue', url])
                into.append(workers(args.darkroom, database, f'w{n}r{r}', n))
            plain_a.append(timed([args.darkroom, 'run', FIT, photos[0].rsplit('/', 1)[0], '--quiet', '-o', out('pa')]))
            queued_a.append(timed([args.darkroom, 'run', FIT, photos[0].rsplit('/', 1)[0], '--quiet', '-o', out('qa'),
                                   '--queue', ready(f'qa{r}')]))
            plain_a4.append(timed([args.darkroom, 'run', FIT, case_a, '--quiet', '-o', out('pa4')]))
            shutil.rmtree(out('pa4'), ignore_errors=True)
            single_a4.append(timed([args.darkroom, 'run', FIT, case_a, '--quiet', '--jobs', '1', '-o', out('pa4')]))
            queued_a4.append(timed([args.darkroom, 'run', FIT, case_a, '--quiet', '-o', out('qa4'),
                                    '--queue', ready(f'qa4r{r}')]))
            for name in ('pt', 'qt', 'pa', 'qa', 'pa4', 'qa4'):
                shutil.rmtree(out(name), ignore_errors=True)
        m = statistics.median
        per_job = (m(queued_tiny) - m(plain_tiny)) / 2000 * 1000
        scaling = m(one) / m(two)
        local = m(plain_a) / m(queued_a)
        local4 = m(plain_a4) / m(queued_a4)
        ceiling = m(single_a4) / m(plain_a4)
        print(f'\n## Queue on PostgreSQL (medians of {args.rounds} rounds; PostgreSQL on the same 2 cores)\n')
        print('| measure | darkroom run | through the queue | result | goal |')
        print('|---|---|---|---|---|')
        print(f'| cost per job (2,000 tiny PNGs, fetch only) | {m(plain_tiny):.2f} s | {m(queued_tiny):.2f} s '
              f'| {per_job:.2f} ms/job | <= 2 ms {"met" if per_job <= 2 else "MISSED"} |')
        print(f'| 2 workers x 1 slot vs 1 worker, case A x4 (200 jobs) | 1 worker {m(one):.2f} s | 2 workers {m(two):.2f} s '
              f'| {scaling:.2f}x | >= 1.7x {"met" if scaling >= 1.7 else "MISSED"} |')
        print(f'| the same 200 jobs without a queue: run --jobs 2 vs --jobs 1 (these cores\' ceiling) '
              f'| 1 job {m(single_a4):.2f} s | 2 jobs {m(plain_a4):.2f} s | {ceiling:.2f}x | (shown) |')
        print(f'| case A x4 (200 jobs) on one machine, run --queue vs run | {m(plain_a4):.2f} s | {m(queued_a4):.2f} s '
              f'| {local4:.2f}x | >= 0.9x {"met" if local4 >= 0.9 else "MISSED"} |')
        print(f'| case A (50 jobs, 0.4 s: mostly the connection and the enqueue) | {m(plain_a):.2f} s | {m(queued_a):.2f} s '
              f'| {local:.2f}x | (shown) |')
        if per_job > 2 or scaling < 1.7 or local4 < 0.9:
            sys.exit(1)
    finally:
        if database:
            database.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
