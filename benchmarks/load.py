"""Load test: N loopback clients mix cheap and expensive callbacks against a server this script starts.

Each client is a `Browser` of app_latency.py (real /_dash-update-component payloads, chains
followed) over HTTP on 127.0.0.1, with its own session cookie. After a warm-up (every client
loads the page and its sample and presses Release once), for --duration seconds a share of the
clients release HTF trees again and again (fresh randomness, small ε), the others draw
rectangles and read their private answers on their current release; each waits --think
seconds (on average) between its actions, as a person would. Prints throughput,
p50/p95 latency of the cheap answers and the expensive releases, errors, and the server's
memory (PSS of its master, workers and pool processes) over the run; nothing is asserted.

With --uploads N, after that minute N more browsers upload a CSV of --upload-mb MB each at the
same moment (dcc.Upload's base64 data URL in the callback's JSON body, the chain after it
followed), --upload-rounds times, each round followed by --settle seconds: it prints the cheap
answers' p95 without and during the uploads, and the server's memory at the start, at its peak
and --settle seconds after each round. With --slow-clients K, K raw sockets trickle a request
body a few bytes a second while new connections are timed: it prints how many stalled. Usage:
    python benchmarks/load.py [--clients 20] [--duration 60] [--workers 3]
    python benchmarks/load.py --server dev [--repo OLD_CHECKOUT]   # one threaded dev-server process
    python benchmarks/load.py --uploads 5 --upload-mb 28 [--upload-rounds 3] [--slow-clients 4]
"""
from __future__ import annotations

import argparse
import base64
import multiprocessing
import os
import queue as queue_module
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from app_latency import LOAD_CB, MAP_CB, NY, QUERY_CB, RELEASE_CB, Browser, rect_geojson  # noqa: E402

import dp  # noqa: E402
from components import ids  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
OFFLINE_TILES = "http://127.0.0.1:9/{z}/{x}/{y}.png"
EPSILON = 0.05          # per release: a session's budget (set to 1000) never runs out


class Http:
    """The Flask test client's interface (get, post, get_json) over a real HTTP session."""

    class Response:
        def __init__(self, r: requests.Response):
            self.status_code, self._r = r.status_code, r

        def get_json(self):
            return self._r.json()

        def get_data(self, as_text=False):
            return self._r.text if as_text else self._r.content

    def __init__(self, base: str, timeout: float):
        self.base, self.timeout, self.session = base, timeout, requests.Session()

    def get(self, path):
        return self.Response(self.session.get(self.base + path, timeout=self.timeout))

    def post(self, path, data, content_type):
        return self.Response(self.session.post(self.base + path, data=data, timeout=self.timeout,
                                               headers={"Content-Type": content_type}))


def open_page(b: Browser):
    """A first visit to the dashboard: its address, the layout, the dependencies, the page and
    its initial callback chain."""
    b.open()
    b.load()


def client(base: str, releaser: bool, start_at: float, stop, seed: int, out: list,
           timeout: float, think: float):
    """One browser: warm up, wait for the start, then release trees or ask rectangles until the
    stop (`stop.value`, seconds since the epoch, shared so that an upload run can move it). Each
    record is (label, seconds, error or None, when its action started)."""
    b, rng = Browser(Http(base, timeout)), random.Random(seed)
    try:
        open_page(b)
        if releaser:
            b.act(ids.MECHANISM, "value", "htf")
            b.comps[ids.EPSILON_VALUE]["value"] = EPSILON
        b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)     # a page load spends nothing
    except Exception as exc:          # a failed warm-up is one error of this client
        out.append(("warm-up", 0.0, f"{type(exc).__name__}: {exc}"[:200], time.time()))
        return
    time.sleep(max(start_at - time.time(), 0) + rng.uniform(0, think))
    while time.time() < stop.value:
        b.times, began = [], time.time()
        try:
            if releaser:
                b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
            else:
                rect = dp.random_workload(NY, 1, area_frac=rng.uniform(0.001, 0.05), rng=rng.randrange(1 << 30))[0]
                b.act(ids.EDIT, "geojson", rect_geojson(rect))
            error = None
        except Exception as exc:      # HTTP error or timeout: counted, the client goes on
            error = f"{type(exc).__name__}: {exc}"[:200]
        done = time.time()
        for output, dt in b.times:
            if done <= stop.value:
                out.append((("release chain: " if releaser else "drawing chain: ") + output, dt, None, began))
        if error:
            out.append(("error", 0.0, error, began))
        if releaser and "Not released" in str(b.comps[ids.RELEASE_STATUS].get("children")):
            out.append(("refused", 0.0, str(b.comps[ids.RELEASE_STATUS]["children"])[:200], began))
        time.sleep(rng.uniform(0.5, 1.5) * think)


def client_process(base, roles, seeds, start_at, stop, timeout, think, queue):
    """Several client threads in one process (the clients' own CPU time is spread over processes)."""
    out: list = []
    threads = [threading.Thread(target=client, args=(base, r, start_at, stop, s, out, timeout, think))
               for r, s in zip(roles, seeds)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(out)


def make_csvs(folder: Path, count: int, mb: float) -> list[Path]:
    """`count` CSV files of about `mb` MB each in `folder`: a lon,lat header, then points of the
    city sample in the New York box at 6 decimals (GPS precision, about 21 bytes a row), written
    by pyarrow in C; a different seed per file, so every upload is a new dataset."""
    x, y = dp.SAMPLES["city_200k"].make(NY, 10_000, 0)
    sink = pa.BufferOutputStream()
    pcsv.write_csv(pa.table({"lon": np.round(x, 6), "lat": np.round(y, 6)}), sink,
                   pcsv.WriteOptions(include_header=False))
    n = int(mb * 1e6 / (sink.getvalue().size / 10_000))           # rows for the size asked
    paths = []
    for i in range(count):
        x, y = dp.SAMPLES["city_200k"].make(NY, n, 1000 + i)
        path = folder / f"upload-{i}.csv"
        with open(path, "wb") as f:
            f.write(b"lon,lat\n")
            pcsv.write_csv(pa.table({"lon": np.round(x, 6), "lat": np.round(y, 6)}), f,
                           pcsv.WriteOptions(include_header=False))
        paths.append(path)
    return paths


def data_url(path: Path) -> str:
    """dcc.Upload's `contents` for a file: the browser's FileReader.readAsDataURL."""
    return "data:text/csv;base64," + base64.b64encode(path.read_bytes()).decode()


def upload_client(base: str, files: list, timeout: float, go, results):
    """One browser uploading: warm up, then for each round wait for "go" on its queue, upload
    that round's file through dcc.Upload (chain followed) and put (round, started, ended, load
    callback s, chain s, error or None) on `results`."""
    b, failed = Browser(Http(base, timeout)), None
    try:
        open_page(b)
    except Exception as exc:          # still one result a round, so that the rounds go on
        failed = f"warm-up: {type(exc).__name__}: {exc}"[:200]
    for r, path in enumerate(files):
        url = data_url(path) if failed is None else ""   # made before the round: client time only
        go.get()
        began, error = time.time(), None
        if failed:
            results.put((r, began, began, 0.0, 0.0, failed))
            continue
        try:
            secs = b.act(ids.UPLOAD, "contents", url, {(ids.UPLOAD, "filename"): path.name})
            status = str(b.comps[ids.UPLOAD_STATUS].get("children"))
            if "Loaded" not in status:
                error = status[:200]
        except Exception as exc:
            secs, error = {"total": 0.0}, f"{type(exc).__name__}: {exc}"[:200]
        del url
        load = sum(v for k, v in secs.items() if k != "total" and LOAD_CB in k)
        results.put((r, began, time.time(), load, secs["total"], error))


def run_uploads(a, proc, go_queues: list, results, stop) -> tuple[list, list]:
    """The upload rounds, driven from here once the measured minute without uploads is over:
    all upload clients start together, then --settle seconds pass after the last one ends.
    Returns the uploads' results and (time, server MB) samples every half second throughout;
    finally stops the cheap clients."""
    done, mem = [], [(time.time(), memory_mb(proc.pid))]
    for r in range(a.upload_rounds):
        for q in go_queues:
            q.put(r)
        got = []
        while len(got) < len(go_queues):
            try:
                got.append(results.get(timeout=0.5))
            except queue_module.Empty:      # none ended yet: sample and wait on
                pass
            mem.append((time.time(), memory_mb(proc.pid)))
        done += got
        settle_end = max(g[2] for g in got) + a.settle
        while time.time() < settle_end:
            time.sleep(min(0.5, max(settle_end - time.time(), 0)))
            mem.append((time.time(), memory_mb(proc.pid)))
    stop.value = time.time()
    return done, mem


def slow_check(a, port: int) -> dict:
    """A few clients trickle a request body: each a raw socket sending a POST's headers at
    once, then 3 bytes a second of a body it never finishes, for --slow-seconds; meanwhile
    --slow-new new connections (one every 0.5 s, each its own thread and connection) GET the
    page, timed. A new request stalled if it took over --stall seconds."""
    socks = []
    for _ in range(a.slow_clients):
        s = socket.create_connection((HOST, port))
        s.sendall(f"POST /_dash-update-component HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{".encode())
        socks.append(s)
    closed_at = time.time() + a.slow_seconds
    times: list = []

    def trickle():
        while time.time() < closed_at:
            time.sleep(1.0)
            for s in socks:
                try:
                    s.sendall(b'"a"')
                except OSError:
                    pass

    def one():
        t = time.perf_counter()
        try:
            ok = requests.get(f"http://{HOST}:{port}/", timeout=a.slow_seconds + 60).status_code == 200
        except requests.RequestException:
            ok = False
        times.append((time.perf_counter() - t, ok, time.time()))

    feeder = threading.Thread(target=trickle)
    feeder.start()
    time.sleep(1.0)
    news = []
    for _ in range(a.slow_new):
        news.append(threading.Thread(target=one))
        news[-1].start()
        time.sleep(0.5)
    feeder.join()
    for s in socks:
        s.close()
    for t in news:
        t.join()
    stalled = [dt for dt, ok, _ in times if dt > a.stall or not ok]
    return {"stalled": len(stalled), "n": len(times), "max": max(dt for dt, _, _ in times),
            "after_close": sum(1 for dt, _, end in times if dt > a.stall and end >= closed_at),
            "p50": percentile([dt for dt, _, _ in times], 0.5)}


def memory_mb(pid: int) -> float:
    """Memory of a process and all its descendants, MB: the sum of their PSS (resident pages,
    each shared page split between the processes sharing it, so nothing is counted twice)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
            total += int(next(ln.split()[1] for ln in rollup.splitlines() if ln.startswith("Pss:")))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, StopIteration, ProcessLookupError):
            pass
    return total / 1024


def folder_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20 if folder.exists() else 0.0


def free_port() -> int:
    """A TCP port free on this host now, for a server to start on."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_server(a, port: int, tmp: Path, extra=()) -> subprocess.Popen:
    """The server under test: gunicorn through `python app.py` (with `extra` options), or one
    threaded dev-server process."""
    repo = Path(a.repo).resolve()
    if a.server == "gunicorn":
        cmd = [sys.executable, "app.py", "--host", HOST, "--port", str(port), "--workers", str(a.workers),
               "--threads", str(a.threads), "--heavy-workers", str(a.heavy_workers),
               "--store-dir", str(tmp / "store"), "--accounts-dir", str(tmp / "accounts"),
               "--default-budget", "1000", "--tiles-url", OFFLINE_TILES, *extra]
    else:
        cfg = {"tiles_url": OFFLINE_TILES, "accounts_dir": str(tmp / "accounts"),
               "store_dir": str(tmp / "store"), "default_budget": 1000.0}
        cmd = [sys.executable, "-c", f"from app import create_app; create_app({cfg!r}).run("
               f"host={HOST!r}, port={port}, threaded=True)"]
    log = open(a.server_log, "ab") if a.server_log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, cwd=repo, stdout=log, stderr=log, start_new_session=True)
    end = time.time() + 120
    while time.time() < end:
        try:
            if requests.get(f"http://{HOST}:{port}/", timeout=5).status_code == 200:
                return proc
        except requests.RequestException:       # not listening yet, or too busy starting to answer
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)           # its workers and pools too (a session of its own)
    raise RuntimeError("the server did not start")


def percentile(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(int(q * len(xs)), len(xs) - 1)] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of measured load")
    ap.add_argument("--releasers", type=float, default=0.25,
                    help="share of the clients releasing trees (the rest ask rectangles)")
    ap.add_argument("--server", choices=("gunicorn", "dev"), default="gunicorn")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--heavy-workers", type=int, default=1)
    ap.add_argument("--repo", default=str(ROOT), help="checkout whose app.py is served (e.g. an older one)")
    ap.add_argument("--think", type=float, default=1.0,
                    help="mean seconds a client waits between its actions (0: back to back)")
    ap.add_argument("--client-procs", type=int, default=0,
                    help="processes the client threads run in (default: one per client, so one "
                         "client parsing a big response never delays another's clock)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a request counts as an error")
    ap.add_argument("--uploads", type=int, default=0,
                    help="browsers uploading a CSV at the same moment after the measured minute "
                         "(0: no upload run)")
    ap.add_argument("--upload-mb", type=float, default=28.0, help="size of each uploaded CSV")
    ap.add_argument("--upload-rounds", type=int, default=1, help="rounds of --uploads uploads")
    ap.add_argument("--settle", type=float, default=60.0,
                    help="seconds after a round's last upload before memory is read again")
    ap.add_argument("--slow-clients", type=int, default=0,
                    help="raw sockets trickling a request body at the end (0: no slow-client check)")
    ap.add_argument("--slow-seconds", type=float, default=20.0, help="how long they trickle")
    ap.add_argument("--slow-new", type=int, default=15, help="new connections timed meanwhile")
    ap.add_argument("--stall", type=float, default=2.0, help="seconds over which a new request stalled")
    ap.add_argument("--server-log", help="append the server's output to this file (default: dropped)")
    a = ap.parse_args()
    a.client_procs = max(min(a.client_procs or a.clients, a.clients), 1)
    n_rel = round(a.clients * a.releasers)
    roles = [i < n_rel for i in range(a.clients)]
    tmp = Path(tempfile.mkdtemp(prefix="dp-load-"))
    files = make_csvs(tmp, a.uploads * a.upload_rounds, a.upload_mb) if a.uploads else []
    port = free_port()
    proc = start_server(a, port, tmp)
    records, uploads, up_mem, slow = [], [], [], None
    try:
        base = f"http://{HOST}:{port}"
        warm = 15 + 1.5 * (a.clients + a.uploads)   # every client loads its page before the start
        start_at = time.time() + warm
        ctx = multiprocessing.get_context("fork")
        stop = ctx.Value("d", float("inf") if a.uploads else start_at + a.duration)  # uploads: moved at the end
        queue, results = ctx.Queue(), ctx.Queue()
        procs = [ctx.Process(target=client_process, args=(
            base, roles[i::a.client_procs], list(range(a.clients))[i::a.client_procs],
            start_at, stop, a.timeout, a.think, queue)) for i in range(a.client_procs if a.clients else 0)]
        go = [ctx.Queue() for _ in range(a.uploads)]
        uploaders = [ctx.Process(target=upload_client, args=(
            base, files[i::a.uploads], a.timeout * 5, go[i], results), daemon=True) for i in range(a.uploads)]
        for p in procs + uploaders:
            p.start()
        time.sleep(max(start_at - time.time(), 0))
        store_before, samples = folder_mb(tmp / "store"), [memory_mb(proc.pid)]
        while time.time() < start_at + a.duration:
            time.sleep(min(a.duration / 4, max(start_at + a.duration - time.time(), 0)))
            samples.append(memory_mb(proc.pid))
        if a.uploads:                         # the cheap clients go on through the uploads
            uploads, up_mem = run_uploads(a, proc, go, results, stop)
        records = [r for _ in procs for r in queue.get(timeout=a.timeout + 120)]
        for p in procs + uploaders:
            p.join()
        store_after = folder_mb(tmp / "store")
        if a.slow_clients:
            slow = slow_check(a, port)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    if a.clients:
        report(a, n_rel, [r for r in records if r[3] < start_at + a.duration], samples,
               (store_before, store_after))
    if a.uploads:
        report_uploads(a, records, uploads, up_mem, start_at)
    if slow:
        print(f"slow clients: {a.slow_clients} sockets trickling a request body 3 bytes/s for "
              f"{a.slow_seconds:g} s; {slow['stalled']} of {slow['n']} new requests stalled "
              f"(over {a.stall:g} s or failed), {slow['after_close']} of them answered only after "
              f"the trickling sockets closed; new requests p50 {slow['p50']:.3f} s, max "
              f"{slow['max']:.1f} s")


def report_uploads(a, records: list, uploads: list, mem: list, start_at: float):
    """The upload run: cheap answers' latency without, during and after the uploads, the
    uploads' own times, and the server's memory against the goals (printed, not asserted)."""
    def cheap(lo, hi):
        return [dt for out, dt, err, t in records
                if err is None and out.startswith("drawing chain: ") and QUERY_CB in out and lo <= t < hi]
    rounds = [(min(u[1] for u in uploads if u[0] == r), max(u[2] for u in uploads if u[0] == r))
              for r in range(a.upload_rounds)]
    windows = [(f"without uploads ({a.duration:g} s before)", [cheap(start_at, start_at + a.duration)])]
    windows += [(f"during uploads (round {r + 1}, {hi - lo:.1f} s)", [cheap(lo, hi)])
                for r, (lo, hi) in enumerate(rounds)]
    windows += [(f"after uploads ({a.settle:g} s after each round)",
                 [cheap(hi, hi + a.settle) for _, hi in rounds])]
    during = [dt for lo, hi in rounds for dt in cheap(lo, hi)]
    print(f"\nupload run: {a.uploads} browsers each uploading a {a.upload_mb:g} MB CSV at the same "
          f"moment, {a.upload_rounds} round(s), beside {a.clients} clients")
    print(f"{'cheap rectangle answers':<44} {'count':>6} {'p50 s':>7} {'p95 s':>7} {'max s':>7}")
    for label, parts in windows:
        xs = [dt for part in parts for dt in part]
        print(f"{label:<44} {len(xs):>6} {percentile(xs, .5):>7.3f} {percentile(xs, .95):>7.3f} "
              f"{max(xs, default=float('nan')):>7.3f}")
    ok = [u for u in uploads if u[5] is None]
    print(f"uploads: {len(ok)} of {len(uploads)} loaded; load callback p50 "
          f"{percentile([u[3] for u in ok], .5):.2f} s, max {max((u[3] for u in ok), default=float('nan')):.2f} s; "
          f"whole chain p50 {percentile([u[4] for u in ok], .5):.2f} s, max "
          f"{max((u[4] for u in ok), default=float('nan')):.2f} s"
          + (f"; first error: {next(u[5] for u in uploads if u[5])}" if len(ok) < len(uploads) else ""))
    print(f"cheap clients' errors, whole run: {error_summary(records)}")
    start, peak = mem[0][1], max(m for _, m in mem)
    after = [next((m for t, m in mem if t >= hi + a.settle - 0.75), mem[-1][1]) for _, hi in rounds]
    print(f"server memory (PSS), MB: start {start:.0f}, peak {peak:.0f} (x{peak / start:.2f}), "
          f"{a.settle:g} s after each round " + " -> ".join(f"{m:.0f}" for m in after)
          + f" (x{after[-1] / start:.2f})")
    p95 = percentile(during, .95)
    print(f"goals (printed, not asserted): cheap p95 during uploads {p95:.3f} s <= 0.2 s: "
          f"{'met' if p95 <= 0.2 else 'NOT met'}; memory {a.settle:g} s after the uploads within 20% "
          f"of the start (x{after[-1] / start:.2f} <= 1.20): {'met' if after[-1] <= 1.2 * start else 'NOT met'}")


def error_summary(records: list) -> str:
    """How many requests failed, and how many of each kind (the message's first line: an HTTP
    status and its page title, or the exception)."""
    kinds: dict = {}
    for _, _, err, _ in records:
        if err is not None:
            what = " ".join(err.replace("<", " <").split("\n")[0].split())[:70]
            kinds[what] = kinds.get(what, 0) + 1
    return f"{sum(kinds.values())}" + "".join(f"; {n} x {what}" for what, n in kinds.items())


def report(a, n_rel: int, records: list, mem: list, store: tuple):
    """The table: per kind of request, its count, throughput and latency; then errors and memory."""
    kinds = (("cheap: rectangle answer (compare)", "drawing chain: ", QUERY_CB),
             ("other callbacks of a drawing", "drawing chain: ", ""),
             ("expensive: HTF release", "release chain: ", RELEASE_CB),
             ("map redraw after a release", "release chain: ", MAP_CB),
             ("other callbacks after a release", "release chain: ", ""))
    server = (f"gunicorn {a.workers} workers x {a.threads} threads, heavy pool {a.heavy_workers}"
              if a.server == "gunicorn" else "one threaded dev-server process")
    print(f"{a.clients} clients ({n_rel} releasing HTF trees at eps = {EPSILON}), think {a.think:g} s, "
          f"{a.duration:g} s, {server}, repo {Path(a.repo).resolve().name}")
    print(f"{'request':<36} {'count':>6} {'per s':>7} {'p50 s':>7} {'p95 s':>7} {'max s':>7}")
    timed = [r for r in records if r[2] is None]
    named = (QUERY_CB, RELEASE_CB, MAP_CB)
    for label, chain, which in kinds:
        xs = [dt for out, dt, *_ in timed if out.startswith(chain) and (
            which in out if which else not any(w in out for w in named))]
        print(f"{label:<36} {len(xs):>6} {len(xs) / a.duration:>7.1f} {percentile(xs, .5):>7.3f} "
              f"{percentile(xs, .95):>7.3f} {max(xs, default=float('nan')):>7.3f}")
    print(f"{'all requests':<36} {len(timed):>6} {len(timed) / a.duration:>7.1f}")
    print(f"errors: {error_summary(records)}")
    print("server memory (PSS of master, workers and pool processes), MB, at 0/25/50/75/100% of "
          "the run: " + " ".join(f"{m:.0f}" for m in mem) + f" (end/start x{mem[-1] / mem[0]:.2f}); "
          f"store on disk {store[0]:.1f} -> {store[1]:.1f} MB")
    cheap = [dt for out, dt, *_ in timed if out.startswith("drawing chain: ") and QUERY_CB in out]
    print(f"cheap answers: p95 / 0.5 s target = {percentile(cheap, .95) / 0.5:.2f}")


if __name__ == "__main__":
    main()
