#!/usr/bin/env python3
"""HTTP benchmark: nginx on 127.0.0.1 serves 200 distinct images; curl --parallel, darkroom
fetch-only and darkroom fetch+thumbnail fetch them at concurrency 8 and 32, rounds interleaved.

usage: bench_http.py DARKROOM_BINARY [--rounds N]
Needs nginx and curl (installed by scripts/install-deps.sh --bench) and the case A photos built by
../shared/bench/make-benchset.sh into $DARKROOM_BENCH_DIR (default /tmp/darkroom-bench).
"""
import argparse, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH = os.environ.get('DARKROOM_BENCH_DIR', '/tmp/darkroom-bench')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def start_nginx(folder, port):
    """nginx on 127.0.0.1:port serving `folder`; returns its prefix for stop_nginx."""
    return start_nginx_servers([(port, f'root {folder};')])


def start_nginx_servers(servers, http_extra='', workers=2, prefix=None):
    """One nginx with a server per (port, directives) pair; returns its prefix for stop_nginx.
    `http_extra` adds directives to the http block (a log_format, say)."""
    prefix = prefix or tempfile.mkdtemp(prefix='darkroom-nginx-')
    os.makedirs(prefix, exist_ok=True)
    conf = os.path.join(prefix, 'nginx.conf')
    blocks = '\n'.join(f'  server {{ listen 127.0.0.1:{port}; {body} }}' for port, body in servers)
    with open(conf, 'w') as f:
        f.write(f"""worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  keepalive_requests 100000;
  types {{ image/jpeg jpg; image/webp webp; }}
  {http_extra}
  client_body_temp_path {prefix}; proxy_temp_path {prefix}; fastcgi_temp_path {prefix}; uwsgi_temp_path {prefix}; scgi_temp_path {prefix};
{blocks}
}}
""")
    subprocess.run(['nginx', '-c', conf, '-p', prefix], check=True)
    for port, _ in servers:
        for _ in range(100):
            try:
                socket.create_connection(('127.0.0.1', port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
    return prefix


def stop_nginx(prefix):
    try:
        with open(os.path.join(prefix, 'nginx.pid')) as f:
            os.kill(int(f.read().strip()), signal.SIGQUIT)
    except (OSError, ValueError):
        pass


def run(cmd, out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    return wall, p.returncode, len(os.listdir(out)), p.stderr.decode(errors='replace')[-300:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('darkroom')
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    photos = os.path.join(BENCH, 'set50')
    subprocess.run([os.path.join(ROOT, '..', 'shared', 'bench', 'make-benchset.sh'), BENCH], check=True, stdout=subprocess.DEVNULL)
    work = tempfile.mkdtemp(prefix='darkroom-http-bench-')
    served = os.path.join(work, 'served')
    os.makedirs(served)
    os.chmod(work, 0o755)  # nginx's workers run as an unprivileged user
    os.chmod(served, 0o755)
    names = sorted(n for n in os.listdir(photos) if n.endswith('.jpg'))
    for i in range(200):  # 200 distinct URLs over the 50 photos
        os.link(os.path.join(photos, names[i % len(names)]), os.path.join(served, f'img{i:03d}.jpg'))
    port = free_port()
    prefix = start_nginx(served, port)
    try:
        urls = [f'http://127.0.0.1:{port}/img{i:03d}.jpg' for i in range(200)]
        with open(os.path.join(work, 'urls.txt'), 'w') as f:
            f.write('\n'.join(urls) + '\n')
        out = os.path.join(work, 'out')
        with open(os.path.join(work, 'curl.cfg'), 'w') as f:
            for i, u in enumerate(urls):
                f.write(f'url = "{u}"\noutput = "{out}/img{i:03d}.jpg"\n')
        rows = []
        for n in (8, 32):
            cmds = [
                ('curl --parallel', f'curl -sf --parallel --parallel-max {n} -K {work}/curl.cfg'),
                ('darkroom fetch', f'{a.darkroom} run {ROOT}/Examples/pipelines/bench-http-fetch.json --input-list {work}/urls.txt '
                 f'--fetch-concurrency {n} --output {out} --quiet'),
                ('darkroom fetch+thumb', f'{a.darkroom} run {ROOT}/Examples/pipelines/bench-http-thumb.json --input-list {work}/urls.txt '
                 f'--fetch-concurrency {n} --output {out} --quiet'),
            ]
            times = {label: [] for label, _ in cmds}
            for label, cmd in cmds:  # warm-up
                wall, rc, count, err = run(cmd, out)
                if rc != 0 or count != 200:
                    print(f'warm-up of {label}: rc={rc} outputs={count}/200 {err}', file=sys.stderr)
            for r in range(a.rounds):
                for label, cmd in cmds[r % 3:] + cmds[:r % 3]:
                    wall, rc, count, err = run(cmd, out)
                    times[label].append((wall, rc == 0 and count == 200))
                    if rc != 0 or count != 200:
                        print(f'{label} at {n}: rc={rc} outputs={count}/200 {err}', file=sys.stderr)
            ref = 200 / statistics.median(w for w, _ in times['curl --parallel'])
            for label, _ in cmds:
                rate = 200 / statistics.median(w for w, _ in times[label])
                rows.append((n, label, rate, rate / ref, all(ok for _, ok in times[label])))
        print(f'200 distinct images (~{sum(os.path.getsize(os.path.join(photos, x)) for x in names) * 4 // 1_000_000} MB) '
              f'from nginx on 127.0.0.1, {a.rounds} rounds, medians\n')
        print('| concurrency | command | transfers/s | vs curl | ok |')
        print('|---:|---|---:|---:|:-:|')
        for n, label, rate, ratio, ok in rows:
            print(f'| {n} | {label} | {rate:.1f} | {ratio:.2f}x | {"yes" if ok else "NO"} |')
    finally:
        stop_nginx(prefix)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
