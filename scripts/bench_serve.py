#!/usr/bin/env python3
"""Image-server benchmark: `darkroom serve` against thumbor 7 on thumbor's own URLs.

thumbor (PyPI, in a virtual environment: no storage, no result storage, engine thread pool = cores,
quality 80) and `darkroom serve` (result cache off) read the 50 photos of set50 from one nginx origin
on 127.0.0.1 and are driven by wrk with the same URLs,
  /unsafe/fit-in/512x512/filters:format(jpeg):quality(80)/http%3A%2F%2F127.0.0.1%3APORT%2Fp01_....jpg
(and the same with webp), 2 connections, rounds interleaved, medians. Then darkroom with its result
cache on, warmed, against nginx serving the same bytes as static files; then STORM concurrent
requests for one uncached URL against a fresh darkroom (one origin request and one render expected).

usage: bench_serve.py DARKROOM_BINARY [--rounds N] [--duration S] [--storm N] [--json FILE]
       bench_serve.py --peers-only [...]     thumbor, the origin and nginx alone (no darkroom)
Needs wrk and nginx (scripts/install-deps.sh --bench) and the set50 photos built by
../shared/bench/make-benchset.sh into $DARKROOM_BENCH_DIR (default /tmp/darkroom-bench). thumbor is
installed into $DARKROOM_THUMBOR_VENV (default ~/.cache/darkroom-bench/thumbor-venv) when missing.
"""
import argparse, asyncio, hashlib, json, os, resource, shutil, signal, socket, statistics, subprocess, sys
import tempfile, threading, time, urllib.error, urllib.parse, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH = os.environ.get('DARKROOM_BENCH_DIR', '/tmp/darkroom-bench')
VENV = os.environ.get('DARKROOM_THUMBOR_VENV', os.path.expanduser('~/.cache/darkroom-bench/thumbor-venv'))
THUMBOR = '7.8.0'  # the version the issue names; the newest 7.x on PyPI when it is not there
CORES = os.cpu_count() or 2
CLK = os.sysconf('SC_CLK_TCK')
FORMATS = ('jpeg', 'webp')
MAGIC = {'jpeg': lambda b: b[:3] == b'\xff\xd8\xff', 'webp': lambda b: b[:4] == b'RIFF' and b[8:12] == b'WEBP'}
# Goals from issue 15
SPEEDUP, CACHE_VS_NGINX = 1.8, 0.5

sys.path.insert(0, HERE)
from bench_http import free_port, start_nginx_servers, stop_nginx  # noqa: E402


def wait_http(url, proc=None, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return True
        except (OSError, urllib.error.URLError):
            time.sleep(0.1)
    return False


def get(url, timeout=60):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# ---------------------------------------------------------------- thumbor in its virtual environment

def thumbor_venv():
    """Creates the venv and installs thumbor when missing; returns (python, installed version)."""
    python = os.path.join(VENV, 'bin', 'python')
    probe = [python, '-c', 'import importlib.metadata as m; print(m.version("thumbor"))']
    if os.path.exists(python):
        p = subprocess.run(probe, capture_output=True, text=True)
        if p.returncode == 0:
            return python, p.stdout.strip()
    print(f'installing thumbor into {VENV} ...', file=sys.stderr)
    subprocess.run([sys.executable, '-m', 'venv', VENV], check=True)
    pip = [python, '-m', 'pip', 'install', '-q', '--disable-pip-version-check']
    if subprocess.run(pip + [f'thumbor=={THUMBOR}']).returncode != 0:
        print(f'thumbor {THUMBOR} unavailable, taking the newest 7.x', file=sys.stderr)
        subprocess.run(pip + ['thumbor>=7,<8'], check=True)
    return python, subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()


def start_thumbor(python, work, port):
    conf = os.path.join(work, 'thumbor.conf')
    with open(conf, 'w') as f:
        f.write(f"""LOADER = 'thumbor.loaders.http_loader'
STORAGE = 'thumbor.storages.no_storage'
RESULT_STORAGE = 'thumbor.result_storages.no_storage'
ENGINE_THREADPOOL_SIZE = {CORES}
QUALITY = 80
ALLOW_UNSAFE_URL = True
ALLOWED_SOURCES = []
""")  # ALLOWED_SOURCES empty: the HTTP loader may fetch from any host, the loopback origin included
    log = open(os.path.join(work, 'thumbor.log'), 'w')
    proc = subprocess.Popen([os.path.join(os.path.dirname(python), 'thumbor'), '--ip', '127.0.0.1', '--port', str(port),
                             '--conf', conf, '--log-level', 'warning'], stdout=log, stderr=subprocess.STDOUT)
    if not wait_http(f'http://127.0.0.1:{port}/healthcheck', proc):
        sys.exit(f'thumbor did not start:\n{tail(log.name)}')
    return proc


# ---------------------------------------------------------------- darkroom serve

def start_darkroom(binary, work, port, name, result_cache, origin_port, log_level=None):
    config = os.path.join(work, f'{name}.json')
    with open(config, 'w') as f:
        # An absolute image URL must name an allowed host (with its port, when not 80/443);
        # privateHosts lets the SSRF guard through to loopback.
        json.dump({'resultCache': result_cache, 'privateHosts': ['127.0.0.1'], 'quality': 80,
                   'allowHosts': [f'127.0.0.1:{origin_port}']}, f)
    log = open(os.path.join(work, f'{name}.log'), 'w')
    level = ['--log-level', log_level] if log_level else []
    command = [binary, 'serve', '--bind', f'127.0.0.1:{port}', '--allow-unsafe', '--config', config] + level
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    if not wait_http(f'http://127.0.0.1:{port}/healthz', proc):
        proc.kill()
        sys.exit(f'darkroom serve did not start:\n{tail(log.name)}')
    return proc


def metric(port, name):
    """Sum of a Prometheus counter's samples (any labels) from /metrics; None when it has none."""
    status, body = get(f'http://127.0.0.1:{port}/metrics', timeout=10)
    samples = [float(line.rsplit(None, 1)[1]) for line in body.decode(errors='replace').splitlines()
               if line.startswith(name) and line[len(name):len(name) + 1] in (' ', '{')]
    if status != 200 or not samples:
        print(f'note: /metrics (HTTP {status}) has no {name}', file=sys.stderr)
        return None
    return sum(samples)


def delta(after, before):
    return None if after is None or before is None else after - before


def stop(proc):
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def tail(path, n=1500):
    with open(path, errors='replace') as f:
        return f.read()[-n:]


# ---------------------------------------------------------------- nginx: the origin and the static peer

def start_nginx(work, photos, origin_port, static_dir, static_port):
    """One nginx: the origin (set50, each request's URI logged to origin.log, so requests can be counted
    per path) and a static server of pre-rendered bytes."""
    return start_nginx_servers(
        [(origin_port, f'root {photos}; access_log {work}/origin.log uri;'), (static_port, f'root {static_dir};')],
        http_extra="log_format uri '$request_uri';", workers=CORES, prefix=os.path.join(work, 'nginx'))


def origin_count(work, path):
    try:
        with open(os.path.join(work, 'origin.log')) as f:
            return sum(1 for line in f if line.strip() == path)
    except FileNotFoundError:
        return 0


# ---------------------------------------------------------------- /proc: peak RSS and CPU time

def tree(pid):
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir(f'/proc/{p}/task'):
                with open(f'/proc/{p}/task/{task}/children') as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return pids


def cpu_seconds(pid):
    total = 0
    for p in tree(pid):
        try:
            with open(f'/proc/{p}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total / CLK


def peak_rss_mb(pid):
    total = 0
    for p in tree(pid):
        try:
            with open(f'/proc/{p}/status') as f:
                total += next(int(line.split()[1]) for line in f if line.startswith('VmHWM:'))
        except (OSError, StopIteration):
            pass
    return total / 1024


# ---------------------------------------------------------------- wrk

WRK_LUA = """local paths = {%s}
local threads = 0
function setup(thread) thread:set("id", threads); threads = threads + 1 end
function init(args) counter = (id * 25) %% #paths end
function request()
  counter = counter %% #paths + 1
  return wrk.format("GET", paths[counter])
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK-RESULT %%d %%d %%d %%d %%d %%d %%d %%d %%d\\n", summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.max, summary.bytes))
end
"""


def wrk_script(work, name, paths):
    path = os.path.join(work, f'{name}.lua')
    with open(path, 'w') as f:
        f.write(WRK_LUA % ', '.join(json.dumps(p) for p in paths))
    return path


def wrk(port, script, duration, pid=None):
    cpu0 = cpu_seconds(pid) if pid else 0
    p = subprocess.run(['wrk', '-t2', '-c2', f'-d{duration}s', '--timeout', '30s', '-s', script,
                        f'http://127.0.0.1:{port}/'], capture_output=True, text=True)
    cpu = cpu_seconds(pid) - cpu0 if pid else None
    line = next((l for l in p.stdout.splitlines() if l.startswith('WRK-RESULT')), None)
    if p.returncode != 0 or line is None:
        sys.exit(f'wrk failed: {p.stdout}{p.stderr}')
    n, us, errors, status, p50, p95, p99, worst, size = map(int, line.split()[1:])
    return {'requests': n, 'rps': n / (us / 1e6), 'errors': errors, 'non_2xx': status, 'p50_ms': p50 / 1000,
            'p95_ms': p95 / 1000, 'p99_ms': p99 / 1000, 'max_ms': worst / 1000,
            'cpu_ms_per_request': cpu / n * 1000 if cpu is not None and n else None}


def summarize(runs):
    med = lambda k: statistics.median(r[k] for r in runs) if all(r[k] is not None for r in runs) else None
    return {'rps': med('rps'), 'p50_ms': med('p50_ms'), 'p95_ms': med('p95_ms'), 'p99_ms': med('p99_ms'),
            'cpu_ms_per_request': med('cpu_ms_per_request'), 'requests': sum(r['requests'] for r in runs),
            'socket_errors': sum(r['errors'] for r in runs), 'non_2xx': sum(r['non_2xx'] for r in runs), 'rounds': runs}


# ---------------------------------------------------------------- many concurrent requests for one URL

async def storm_async(port, path, count):
    async def connect():
        for attempt in range(50):
            try:
                return await asyncio.open_connection('127.0.0.1', port)
            except OSError:
                await asyncio.sleep(0.1)
        raise OSError('could not connect')

    async def read(reader):
        data = await reader.read(-1)
        head, _, body = data.partition(b'\r\n\r\n')
        lines = head.split(b'\r\n')
        status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
        headers = {k.strip().lower(): v.strip() for k, _, v in (l.decode('latin-1').partition(':') for l in lines[1:])}
        if headers.get('transfer-encoding', '').lower() == 'chunked':
            out, rest = b'', body
            while rest:
                size_line, _, rest = rest.partition(b'\r\n')
                size = int(size_line.split(b';')[0], 16)
                if size == 0:
                    break
                out, rest = out + rest[:size], rest[size + 2:]
            body = out
        elif 'content-length' in headers:
            body = body[:int(headers['content-length'])]
        return status, body

    conns = await asyncio.gather(*(connect() for _ in range(count)))
    request = f'GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n'.encode()
    start = time.perf_counter()
    for _, writer in conns:  # every request written before any response is read
        writer.write(request)
    await asyncio.gather(*(w.drain() for _, w in conns))
    results = await asyncio.gather(*(read(r) for r, _ in conns))
    wall = time.perf_counter() - start
    for _, w in conns:
        w.close()
    return results, wall


def storm(port, path, count):
    results, wall = asyncio.run(asyncio.wait_for(storm_async(port, path, count), timeout=300))
    statuses = {}
    for status, _ in results:
        statuses[status] = statuses.get(status, 0) + 1
    bodies = {hashlib.sha256(b).hexdigest() for s, b in results if s == 200}
    return {'requests': count, 'statuses': statuses, 'distinct_bodies': len(bodies), 'seconds': wall}


# ---------------------------------------------------------------- the benchmark

def fetch_all(port, paths, fmt):
    """Fetches each URL once (warm-up and check): returns the bodies; exits on a bad answer."""
    bodies = []
    for p in paths:
        status, body = get(f'http://127.0.0.1:{port}{p}')
        if status != 200 or not MAGIC[fmt](body):
            sys.exit(f'{p} on port {port}: HTTP {status}, {len(body)} bytes {body[:200]!r}')
        bodies.append(body)
    return bodies


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('darkroom', nargs='?')
    ap.add_argument('--peers-only', action='store_true', help='thumbor, the origin and nginx alone')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--duration', type=int, default=10, help='seconds per wrk run')
    ap.add_argument('--storm', type=int, default=1000, help='concurrent requests for one uncached URL')
    ap.add_argument('--json', help='also write the figures to this file')
    ap.add_argument('--hits-only', action='store_true',
                    help='only the result-cache hits against nginx (no thumbor, no renders, no storm, no goals)')
    ap.add_argument('--darkroom-log-level', help="darkroom serve's --log-level (default: its own, info, with the "
                    "access log; thumbor runs at its default, warning)")
    a = ap.parse_args()
    if not a.peers_only and not a.darkroom:
        ap.error('DARKROOM_BINARY is needed unless --peers-only')
    if a.hits_only and a.peers_only:
        ap.error('--hits-only measures darkroom: it cannot go with --peers-only')
    for tool in ('wrk', 'nginx'):
        if not shutil.which(tool):
            sys.exit(f'{tool} missing: scripts/install-deps.sh --bench')
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the storm's sockets (and the servers', inherited)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, a.storm * 2 + 256)), hard))
    subprocess.run(['bash', os.path.join(ROOT, '..', 'shared', 'bench', 'make-benchset.sh'), BENCH],
                   check=True, stdout=subprocess.DEVNULL)
    photos = os.path.join(BENCH, 'set50')
    names = sorted(n for n in os.listdir(photos) if n.endswith('.jpg'))
    python, version = thumbor_venv()
    print(f'thumbor {version} ({VENV}), engine threads {CORES}; wrk 2 threads x 1 connection, '
          f'{a.rounds} rounds x {a.duration} s, medians', flush=True)

    work = tempfile.mkdtemp(prefix='darkroom-serve-bench-')
    static = os.path.join(work, 'static')
    os.makedirs(static)
    os.chmod(work, 0o755)  # nginx's workers run as an unprivileged user
    os.chmod(static, 0o755)
    origin_port, static_port, thumbor_port, darkroom_port = (free_port() for _ in range(4))
    prefix = start_nginx(work, photos, origin_port, static, static_port)
    procs = []
    report = {'thumbor_version': version, 'cores': CORES, 'rounds': a.rounds, 'duration_s': a.duration,
              'photos': len(names), 'peers_only': a.peers_only}
    try:
        def paths(fmt):
            return [f'/unsafe/fit-in/512x512/filters:format({fmt}):quality(80)/'
                    + urllib.parse.quote(f'http://127.0.0.1:{origin_port}/{n}', safe='') for n in names]
        scripts = {fmt: wrk_script(work, fmt, paths(fmt)) for fmt in FORMATS}

        # -- uncached: thumbor and darkroom (result cache off), rounds interleaved
        servers = {} if a.hits_only else {'thumbor': (thumbor_port, start_thumbor(python, work, thumbor_port))}
        procs.extend(proc for _, proc in servers.values())
        if not a.peers_only and not a.hits_only:
            proc = start_darkroom(a.darkroom, work, darkroom_port, 'darkroom', False, origin_port, a.darkroom_log_level)
            servers['darkroom'] = (darkroom_port, proc)
            procs.append(servers['darkroom'][1])
        sizes, thumbor_jpegs = {}, None
        for name, (port, _) in servers.items():
            for fmt in FORMATS:
                bodies = fetch_all(port, paths(fmt), fmt)
                sizes[(name, fmt)] = statistics.mean(len(b) for b in bodies)
                if name == 'thumbor' and fmt == 'jpeg':
                    thumbor_jpegs = bodies
        runs = {(name, fmt): [] for name in servers for fmt in FORMATS}
        order = list(servers)
        for r in range(a.rounds if order else 0):
            for fmt in FORMATS:
                for name in order[r % len(order):] + order[:r % len(order)]:
                    port, proc = servers[name]
                    runs[(name, fmt)].append(wrk(port, scripts[fmt], a.duration, proc.pid))
                    time.sleep(0.5)
        rss = {name: peak_rss_mb(proc.pid) for name, (_, proc) in servers.items()}
        for name, (_, proc) in servers.items():
            if name == 'darkroom':
                stop(proc)
        uncached = []
        for fmt in FORMATS:
            for name in servers:
                row = summarize(runs[(name, fmt)])
                row.update(server=name, format=fmt, peak_rss_mb=rss[name], mean_bytes=sizes[(name, fmt)])
                uncached.append(row)
        base = {row['format']: row for row in uncached if row['server'] == 'thumbor'}
        for row in uncached:
            row['vs_thumbor'] = row['rps'] / base[row['format']]['rps']
        report['uncached'] = uncached

        # -- result-cache hits against nginx serving the same bytes as static files (JPEG)
        cached = None
        if not a.peers_only:
            cached = start_darkroom(a.darkroom, work, free_port(), 'darkroom-cached', True, origin_port, a.darkroom_log_level)
            procs.append(cached)
            cached_port = int(cached.args[cached.args.index('--bind') + 1].rsplit(':', 1)[1])
            bodies = fetch_all(cached_port, paths('jpeg'), 'jpeg')
            hits0 = metric(cached_port, 'darkroom_result_cache_hits_total')
            again = fetch_all(cached_port, paths('jpeg'), 'jpeg')
            hits = delta(metric(cached_port, 'darkroom_result_cache_hits_total'), hits0)
            report['cache_check'] = {'hits_on_second_pass': hits, 'same_bytes': again == bodies}
            if hits is not None and hits < len(names):
                print(f'note: the second pass over {len(names)} URLs counted {hits:.0f} result-cache hits',
                      file=sys.stderr)
        else:
            bodies = thumbor_jpegs  # no darkroom: nginx serves thumbor's bytes, for its own figure
        for i, body in enumerate(bodies):
            with open(os.path.join(static, f'r{i:02d}.jpg'), 'wb') as f:
                f.write(body)
        static_script = wrk_script(work, 'static', [f'/r{i:02d}.jpg' for i in range(len(bodies))])
        hit_runs = {'nginx static': []}
        if cached:
            hit_runs['darkroom cache hit'] = []
        for r in range(a.rounds):
            for name in (list(hit_runs) if r % 2 == 0 else list(hit_runs)[::-1]):
                if name == 'nginx static':
                    hit_runs[name].append(wrk(static_port, static_script, a.duration))
                else:
                    hit_runs[name].append(wrk(cached_port, scripts['jpeg'], a.duration, cached.pid))
                time.sleep(0.5)
        hits = []
        for name, rs in hit_runs.items():
            row = summarize(rs)
            row.update(server=name, format='jpeg', mean_bytes=statistics.mean(len(b) for b in bodies))
            row['peak_rss_mb'] = peak_rss_mb(cached.pid) if name != 'nginx static' else None
            hits.append(row)
        for row in hits:
            row['vs_nginx'] = row['rps'] / hits[0]['rps']
        report['cache_hits'] = hits
        stop(cached)

        if a.hits_only:
            report['storm'] = None
        else:
            report['storm'] = storm_report(a, work, names, paths, servers, thumbor_port, origin_port, procs)
    finally:
        for proc in procs:
            stop(proc)
        stop_nginx(prefix)

    if a.hits_only:
        print_hits(report)
    else:
        print_report(report, a.peers_only)
    if a.json:
        with open(a.json, 'w') as f:
            json.dump(report, f, indent=2)
    if os.environ.get('DARKROOM_BENCH_KEEP'):
        print(f'kept {work}')
    else:
        shutil.rmtree(work, ignore_errors=True)


def storm_report(a, work, names, paths, servers, thumbor_port, origin_port, procs):
    """STORM concurrent requests for one uncached URL: a fresh darkroom (thumbor when --peers-only)."""
    target = paths('jpeg')[len(names) // 2]
    origin_path = '/' + names[len(names) // 2]
    if a.peers_only:
        print(f'({a.storm} concurrent requests against thumbor, for reference: one render each) ...', flush=True)
        sport = thumbor_port
    else:
        sport = free_port()
        sproc = start_darkroom(a.darkroom, work, sport, 'darkroom-storm', True, origin_port, a.darkroom_log_level)
        procs.append(sproc)
    before = origin_count(work, origin_path)
    renders0 = metric(sport, 'darkroom_renders_total') if not a.peers_only else 0
    result = storm(sport, target, a.storm)
    time.sleep(0.2)  # the origin's log line
    result['origin_requests'] = origin_count(work, origin_path) - before
    result['renders'] = delta(metric(sport, 'darkroom_renders_total'), renders0) if not a.peers_only else None
    result['server'] = 'thumbor' if a.peers_only else 'darkroom'
    return result


def print_hits(rep):
    print(f'\n## result-cache hits (JPEG) vs nginx serving the same bytes as static files\n')
    print('| server | req/s | vs nginx | p50 ms | p95 ms | p99 ms | CPU ms/req | non-2xx | socket errors |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    fmt_ms = lambda v: '-' if v is None else f'{v:.1f}'
    for r in rep['cache_hits']:
        print(f'| {r["server"]} | {r["rps"]:.0f} | {r["vs_nginx"]:.2f}x | {r["p50_ms"]:.2f} | {r["p95_ms"]:.2f} | '
              f'{r["p99_ms"]:.2f} | {fmt_ms(r["cpu_ms_per_request"])} | {r["non_2xx"]} | {r["socket_errors"]} |')


def print_report(rep, peers_only):
    fmt_ms = lambda v: '-' if v is None else f'{v:.1f}'
    print(f'\n## darkroom serve vs thumbor {rep["thumbor_version"]}: {rep["photos"]} photos (set50) -> fit-in 512x512, '
          f'quality 80, no caches, 2 connections\n')
    print('| format | server | req/s | vs thumbor | p50 ms | p95 ms | p99 ms | peak RSS MB | CPU ms/req | mean bytes '
          '| non-2xx | socket errors |')
    print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for r in rep['uncached']:
        print(f'| {r["format"]} | {r["server"]} | {r["rps"]:.1f} | {r["vs_thumbor"]:.2f}x | {fmt_ms(r["p50_ms"])} | '
              f'{fmt_ms(r["p95_ms"])} | {fmt_ms(r["p99_ms"])} | {r["peak_rss_mb"]:.0f} | '
              f'{fmt_ms(r["cpu_ms_per_request"])} | '
              f'{r["mean_bytes"]:.0f} | {r["non_2xx"]} | {r["socket_errors"]} |')
    print_hits(rep)
    s = rep['storm']
    print(f'\n## {s["requests"]} concurrent requests for one uncached URL ({s["server"]})\n')
    renders = '-' if s['renders'] is None else f'{s["renders"]:.0f}'
    print(f'statuses {s["statuses"]}, {s["distinct_bodies"]} distinct bodies, {s["origin_requests"]} origin requests, '
          f'renders {renders}, {s["seconds"]:.2f} s')
    if peers_only:
        print('\n(--peers-only: no darkroom, no goals checked)')
        return
    rows = {(r['server'], r['format']): r for r in rep['uncached']}
    goals = []
    for fmt in FORMATS:
        ratio = rows[('darkroom', fmt)]['vs_thumbor']
        goals.append((f'{fmt}: req/s >= {SPEEDUP}x thumbor', ratio >= SPEEDUP, f'{ratio:.2f}x'))
    for fmt in FORMATS:
        d, t = rows[('darkroom', fmt)]['p95_ms'], rows[('thumbor', fmt)]['p95_ms']
        goals.append((f'{fmt}: p95 <= thumbor', d <= t, f'{d:.1f} vs {t:.1f} ms'))
    d, t = rows[('darkroom', 'jpeg')]['peak_rss_mb'], rows[('thumbor', 'jpeg')]['peak_rss_mb']
    goals.append(('peak RSS <= thumbor', d <= t, f'{d:.0f} vs {t:.0f} MB'))
    ratio = rep['cache_hits'][1]['vs_nginx']
    goals.append((f'cache hits >= {CACHE_VS_NGINX}x nginx static', ratio >= CACHE_VS_NGINX, f'{ratio:.2f}x'))
    ok = (s['statuses'] == {200: s['requests']} and s['distinct_bodies'] == 1 and s['origin_requests'] == 1
          and s['renders'] == 1)
    goals.append((f'{s["requests"]} concurrent: 1 origin request, 1 render', ok,
                  f'{s["origin_requests"]} origin, {renders} renders, {s["statuses"]}'))
    mine = [r for r in rep['uncached'] + rep['cache_hits'] if r['server'].startswith('darkroom')]
    bad = sum(r['non_2xx'] for r in mine), sum(r['socket_errors'] for r in mine)
    goals.append(('every wrk request 2xx, connections kept alive', bad == (0, 0),
                  f'{bad[0]} non-2xx, {bad[1]} socket errors (wrk counts a connection the server closes as one)'))
    rep['goals'] = [{'goal': g, 'pass': p, 'measured': m} for g, p, m in goals]
    print('\n| goal | measured | |\n|---|---|:-:|')
    for g, p, m in goals:
        print(f'| {g} | {m} | {"PASS" if p else "MISS"} |')


if __name__ == '__main__':
    main()
