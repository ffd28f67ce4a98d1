"""Load test: N loopback clients mix cheap and expensive callbacks against a server this script starts.

Each client is a `Browser` of app_latency.py (real /_dash-update-component payloads, chains
followed) over HTTP on 127.0.0.1, with its own session cookie. After a warm-up (every client
loads the page and its sample and presses Release once), for --duration seconds a share of the
clients release HTF trees again and again (fresh randomness, small ε), the others draw
rectangles and read their private answers on their current release; each waits --think
seconds (on average) between its actions, as a person would. Prints throughput,
p50/p95 latency of the cheap answers and the expensive releases, errors, and the server's
memory (PSS of its master, workers and pool processes) over the run; nothing is asserted. Usage:
    python benchmarks/load.py [--clients 20] [--duration 60] [--workers 3]
    python benchmarks/load.py --server dev [--repo OLD_CHECKOUT]   # one threaded dev-server process
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from app_latency import MAP_CB, NY, QUERY_CB, RELEASE_CB, Browser, rect_geojson  # noqa: E402

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
    """A first visit: GET /, the layout, the dependencies and the initial callback chain."""
    b.client.get("/")
    b.tree = b._time(b.client.get, "/_dash-layout")[0].get_json()
    b.deps = [d for d in b._time(b.client.get, "/_dash-dependencies")[0].get_json()
              if not d.get("clientside_function") and not d.get("no_output")]
    b.index()
    b.run(added=set(b.comps))


def client(base: str, releaser: bool, start_at: float, stop_at: float, seed: int, out: list,
           timeout: float, think: float):
    """One browser: warm up, wait for the start, then release trees or ask rectangles until the stop."""
    b, rng = Browser(Http(base, timeout)), random.Random(seed)
    try:
        open_page(b)
        if releaser:
            b.act(ids.MECHANISM, "value", "htf")
            b.comps[ids.EPSILON_VALUE]["value"] = EPSILON
        b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)     # a page load spends nothing
    except Exception as exc:          # a failed warm-up is one error of this client
        out.append(("warm-up", 0.0, f"{type(exc).__name__}: {exc}"[:200]))
        return
    time.sleep(max(start_at - time.time(), 0) + rng.uniform(0, think))
    while time.time() < stop_at:
        b.times = []
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
            if done <= stop_at:
                out.append((("release chain: " if releaser else "drawing chain: ") + output, dt, None))
        if error:
            out.append(("error", 0.0, error))
        if releaser and "Not released" in str(b.comps[ids.RELEASE_STATUS].get("children")):
            out.append(("refused", 0.0, str(b.comps[ids.RELEASE_STATUS]["children"])[:200]))
        time.sleep(rng.uniform(0.5, 1.5) * think)


def client_process(base, roles, seeds, start_at, stop_at, timeout, think, queue):
    """Several client threads in one process (the clients' own CPU time is spread over processes)."""
    out: list = []
    threads = [threading.Thread(target=client, args=(base, r, start_at, stop_at, s, out, timeout, think))
               for r, s in zip(roles, seeds)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(out)


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


def start_server(a, port: int, tmp: Path) -> subprocess.Popen:
    """The server under test: gunicorn through `python app.py`, or one threaded dev-server process."""
    repo = Path(a.repo).resolve()
    if a.server == "gunicorn":
        cmd = [sys.executable, "app.py", "--host", HOST, "--port", str(port), "--workers", str(a.workers),
               "--threads", str(a.threads), "--heavy-workers", str(a.heavy_workers),
               "--store-dir", str(tmp / "store"), "--accounts-dir", str(tmp / "accounts"),
               "--default-budget", "1000", "--tiles-url", OFFLINE_TILES]
    else:
        cfg = {"tiles_url": OFFLINE_TILES, "accounts_dir": str(tmp / "accounts"),
               "store_dir": str(tmp / "store"), "default_budget": 1000.0}
        cmd = [sys.executable, "-c", f"from app import create_app; create_app({cfg!r}).run("
               f"host={HOST!r}, port={port}, threaded=True)"]
    proc = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    end = time.time() + 120
    while time.time() < end:
        try:
            if requests.get(f"http://{HOST}:{port}/", timeout=5).status_code == 200:
                return proc
        except requests.ConnectionError:
            time.sleep(0.2)
    proc.kill()
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
    a = ap.parse_args()
    a.client_procs = a.client_procs or a.clients
    n_rel = round(a.clients * a.releasers)
    roles = [i < n_rel for i in range(a.clients)]
    tmp = Path(tempfile.mkdtemp(prefix="dp-load-"))
    with __import__("socket").socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    proc = start_server(a, port, tmp)
    try:
        base = f"http://{HOST}:{port}"
        warm = 15 + 1.5 * a.clients              # every client loads its page before the start
        start_at = time.time() + warm
        stop_at = start_at + a.duration
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        procs = [ctx.Process(target=client_process, args=(
            base, roles[i::a.client_procs], list(range(a.clients))[i::a.client_procs],
            start_at, stop_at, a.timeout, a.think, queue)) for i in range(a.client_procs)]
        for p in procs:
            p.start()
        time.sleep(max(start_at - time.time(), 0))
        store_before, samples = folder_mb(tmp / "store"), [memory_mb(proc.pid)]
        while time.time() < stop_at:
            time.sleep(min(a.duration / 4, max(stop_at - time.time(), 0)))
            samples.append(memory_mb(proc.pid))
        records = [r for _ in procs for r in queue.get(timeout=a.timeout + 120)]
        for p in procs:
            p.join()
        store_after = folder_mb(tmp / "store")
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    report(a, n_rel, records, samples, (store_before, store_after))


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
        xs = [dt for out, dt, _ in timed if out.startswith(chain) and (
            which in out if which else not any(w in out for w in named))]
        print(f"{label:<36} {len(xs):>6} {len(xs) / a.duration:>7.1f} {percentile(xs, .5):>7.3f} "
              f"{percentile(xs, .95):>7.3f} {max(xs, default=float('nan')):>7.3f}")
    print(f"{'all requests':<36} {len(timed):>6} {len(timed) / a.duration:>7.1f}")
    errors = [r for r in records if r[2] is not None]
    print(f"errors: {len(errors)}" + (f" (first: {errors[0][0]}: {errors[0][2]})" if errors else ""))
    print("server memory (PSS of master, workers and pool processes), MB, at 0/25/50/75/100% of "
          "the run: " + " ".join(f"{m:.0f}" for m in mem) + f" (end/start x{mem[-1] / mem[0]:.2f}); "
          f"store on disk {store[0]:.1f} -> {store[1]:.1f} MB")
    cheap = [dt for out, dt, _ in timed if out.startswith("drawing chain: ") and QUERY_CB in out]
    print(f"cheap answers: p95 / 0.5 s target = {percentile(cheap, .95) / 0.5:.2f}")


if __name__ == "__main__":
    main()
