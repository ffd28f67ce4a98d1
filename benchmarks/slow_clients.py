"""Do clients that trickle their requests stop the server? Page loads alone and beside them.

Starts `python app.py` (gunicorn, 3 workers of 8 request threads) with each --front, opens
--slow connections that send a request's first line and then one header byte every --every
seconds (a "slow loris"), and meanwhile opens the page --loads times, one after another, as a
browser's first visit does (`load.open_page`: GET /, the layout, the dependencies and the
initial callback chain, every request with a --timeout). Prints, per front, how many page loads
finished and their median and worst seconds, alone and beside the slow clients, with each
median's ratio to the fastest. Nothing is asserted. Usage:
    python benchmarks/slow_clients.py [--fronts tornado gthread] [--slow 50] [--loads 20]
"""
from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import ROOT, Http, free_port, open_page, start_server  # noqa: E402
from app_latency import Browser  # noqa: E402


class Trickle:
    """`n` connections to `port` that each send a request line, then a header byte every
    `every` seconds, never finishing (one thread for them all); `cut` counts those the server
    closed."""

    def __init__(self, port: int, n: int, every: float):
        self.every, self.cut, self._stop = every, 0, threading.Event()
        self.socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"POST /_dash-update-component HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            self.socks.append(s)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self.every):
            for s in list(self.socks):
                try:
                    s.sendall(b"X")
                except OSError:           # the server closed it (its read timeout)
                    self.socks.remove(s)
                    self.cut += 1

    def close(self):
        self._stop.set()
        self._thread.join()
        for s in self.socks:
            s.close()


def page_loads(base: str, n: int, timeout: float) -> list[float | None]:
    """Seconds of n first visits one after another (None: a request timed out or failed)."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        try:
            open_page(Browser(Http(base, timeout)))
            out.append(time.perf_counter() - t)
        except Exception:          # a timeout or a refused request: this visit did not load
            out.append(None)
    return out


def run(front: str, a) -> dict:
    """Page loads alone and beside the slow clients, on a fresh server with this front."""
    a.server, a.workers, a.threads, a.heavy_workers, a.server_log, a.repo = "gunicorn", 3, 8, 1, None, str(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proc = start_server(a, port, Path(tmp), extra=["--front", front])
        base = f"http://127.0.0.1:{port}"
        try:
            page_loads(base, 2, a.timeout)                      # warm-up
            alone = page_loads(base, a.loads, a.timeout)
            slow = Trickle(port, a.slow, a.every)
            time.sleep(2 * a.every)                             # every slow client under way
            beside = page_loads(base, a.loads, a.timeout)
            held = len(slow.socks)
            slow.close()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return {"alone": alone, "beside": beside, "held": held}


def summary(times: list) -> tuple[int, float, float]:
    done = [t for t in times if t is not None]
    return len(done), (statistics.median(done) if done else float("inf")), (max(done) if done else float("inf"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fronts", nargs="+", default=["tornado", "gthread"], choices=["tornado", "gthread"])
    ap.add_argument("--slow", type=int, default=50, help="slow connections")
    ap.add_argument("--every", type=float, default=1.0, help="seconds between a slow client's bytes")
    ap.add_argument("--loads", type=int, default=20, help="page loads, alone and beside them")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds a request may take")
    a = ap.parse_args()
    results = {f: run(f, a) for f in a.fronts}
    rows = []
    for f, r in results.items():
        for label in ("alone", "beside"):
            rows.append((f, label, *summary(r[label])))
    fastest = min(m for *_, m, _ in rows)
    print(f"| front | page loads | finished (of {a.loads}) | median s | worst s | median ÷ fastest |")
    print("|---|---|---|---|---|---|")
    for f, label, done, med, worst in rows:
        what = "alone" if label == "alone" else f"beside {a.slow} slow clients"
        print(f"| {f} | {what} | {done} | {med:.3f} | {worst:.3f} | {med / fastest:.1f} |")
    for f, r in results.items():
        print(f"{f}: {r['held']} of {a.slow} slow connections still open at the end")


if __name__ == "__main__":
    main()
