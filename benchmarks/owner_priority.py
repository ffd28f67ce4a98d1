"""Does visitors' work slow the owner down? The owner's release, alone and while visitors load.

Starts `python app.py` (gunicorn, 3 workers, one heavy process per lane) with a known owner
token, opens the owner link in one browser (`load.py`'s HTTP renderer: real callback payloads,
chains followed) and times its Release (HTF, ε 0.05, on the default sample) --reps times with
nothing else running. Then --evaluations visitor browsers each start a large evaluation (ten ε
values, 2,000 rectangles per size, ten repetitions) and --uploads more upload a CSV of
--upload-mb MB each, all at once, and the owner's Release is timed again while they run. The
visitors' browsers run in a process of their own at the lowest CPU priority (on a real server
they are other machines). Prints the medians and their ratio (the target: under 2) and the
slowest release under load by callback. Nothing is asserted.

To tell slowing inside the server's processes from slowing by the machine, --visitors-apart N
serves the visitors from a second server of N workers on the same store and accounts, its
processes at --visitors-nice, so that the owner's server runs nothing of theirs; --settle waits
that many seconds after the warm-up (every pool started) before the releases are timed. Usage:
    python benchmarks/owner_priority.py [--repo OLD_CHECKOUT] [--evaluations 6] [--uploads 12]
        [--visitors-apart 3 --visitors-nice 10] [--settle 20]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import ROOT, Http, data_url, free_port, make_csvs, open_page, start_server  # noqa: E402
from app_latency import Browser  # noqa: E402

from components import ids  # noqa: E402

TOKEN = "owner-priority-benchmark-token-0001"
EVAL_EPSILONS = ",".join(f"{e / 10:g}" for e in range(1, 11))


def owner_browser(base: str) -> Browser:
    """The owner's page, ready to release HTF at ε 0.05 on the default sample."""
    http = Http(base, timeout=600)
    http.get(f"/owner?token={TOKEN}")
    b = Browser(http)
    open_page(b)
    b.act(ids.MECHANISM, "value", "htf")
    b.comps[ids.EPSILON_VALUE]["value"] = 0.05
    return b


def release_seconds(b: Browser, reps: int, parts: dict | None = None, each: list | None = None) -> list[float]:
    """Server seconds of the owner's Release chain, `reps` times; each callback's seconds are
    added to `parts`, and each chain's (callback -> seconds) to `each`."""
    out = []
    for _ in range(reps):
        secs = b.click(ids.RELEASE_BUTTON, ids.RELEASE_REQUEST)
        if "Not released" in str(b.comps[ids.RELEASE_STATUS].get("children")):
            raise RuntimeError(str(b.comps[ids.RELEASE_STATUS]["children"])[:300])
        out.append(secs.pop("total"))
        if each is not None:
            each.append(secs)
        for name, dt in secs.items():
            (parts if parts is not None else {}).setdefault(name, []).append(dt)
    return out


def evaluator(base: str, errors: list):
    """A visitor starting a large evaluation on the default sample (it then runs on its own)."""
    try:
        b = Browser(Http(base, timeout=600))
        open_page(b)
        b.comps[ids.EVAL_EPSILONS]["value"] = EVAL_EPSILONS
        b.comps[ids.EVAL_NQ]["value"] = 2000
        b.comps[ids.EVAL_REPS]["value"] = 10
        b.comps[ids.EVAL_RHO]["value"] = int(b.comps[ids.EVAL_RHO]["value"])   # as a browser's JSON has it
        b.poll_jobs = False           # started, then left to run (a page would poll it twice a second)
        b.act(ids.EVAL_RUN, "n_clicks", 1)
    except Exception as exc:          # counted and printed: the run goes on
        errors.append(f"evaluation: {type(exc).__name__}: {exc}"[:200])


def uploader(base: str, path: Path, url: str, errors: list):
    """A visitor uploading a file (its data URL made beforehand: the client's own CPU time is
    not spent while the owner is timed)."""
    try:
        b = Browser(Http(base, timeout=600))
        open_page(b)
        b.act(ids.UPLOAD, "contents", url, {(ids.UPLOAD, "filename"): path.name})
    except Exception as exc:
        errors.append(f"upload: {type(exc).__name__}: {exc}"[:200])


def visitors(base: str, evaluations: int, urls: list) -> None:
    """The visitors' browsers, all at once, in a process of their own at the lowest CPU priority
    (the owner's client is timed in an interpreter of its own, and the visitors' clients take
    as little as they can of the CPU the server runs on); errors are printed."""
    os.nice(19)        # on a real server they are other machines: the least of this one's CPU
    errors: list = []
    load = [threading.Thread(target=evaluator, args=(base, errors)) for _ in range(evaluations)]
    load += [threading.Thread(target=uploader, args=(base, f, url, errors)) for f, url in urls]
    for t in load:
        t.start()
    for t in load:
        t.join()
    for e in errors:
        print("error:", e, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(ROOT), help="the checkout to serve (default: this one)")
    ap.add_argument("--evaluations", type=int, default=6)
    ap.add_argument("--uploads", type=int, default=12)
    ap.add_argument("--upload-mb", type=float, default=5.0)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--visitors-apart", type=int, default=0, metavar="N",
                    help="serve the visitors from a second server of N workers (0: the owner's)")
    ap.add_argument("--visitors-nice", type=int, default=0, help="that server's priority (nice)")
    ap.add_argument("--settle", type=float, default=0.0, help="seconds to wait after the warm-up")
    a = ap.parse_args()
    a.server, a.workers, a.threads, a.heavy_workers, a.server_log = "gunicorn", 3, 8, 1, None
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = make_csvs(tmp, a.uploads, a.upload_mb)
        port = free_port()
        proc = start_server(a, port, tmp, extra=["--owner-token", TOKEN])
        servers, base = [proc], f"http://127.0.0.1:{port}"
        try:
            visitors_base = base
            if a.visitors_apart:
                port2 = free_port()
                servers.append(start_server(argparse.Namespace(**{**vars(a), "workers": a.visitors_apart}),
                                            port2, tmp, extra=["--owner-token", TOKEN]))
                os.setpriority(os.PRIO_PGRP, servers[-1].pid, a.visitors_nice)   # its session's processes
                visitors_base = f"http://127.0.0.1:{port2}"
            owner = owner_browser(base)
            release_seconds(owner, 1)                        # warm-up: pools started, sample read
            time.sleep(a.settle)
            alone = release_seconds(owner, a.reps)
            urls = [(f, data_url(f)) for f in files]
            load = multiprocessing.get_context("fork").Process(target=visitors, args=(visitors_base, a.evaluations, urls))
            load.start()
            time.sleep(2.0)                                  # the load under way
            parts: dict = {}
            each: list = []
            loaded = release_seconds(owner, a.reps, parts, each)
            load.join()
        finally:
            for p in servers:
                p.terminate()
                p.wait(timeout=60)
    m0, m1 = statistics.median(alone), statistics.median(loaded)
    print(f"| checkout | owner's release alone, median s | while {a.evaluations} evaluations and "
          f"{a.uploads} uploads run, median s | ratio |\n|---|---|---|---|\n"
          f"| {Path(a.repo).name} | {m0:.2f} | {m1:.2f} | {m1 / m0:.1f} |")
    print("alone:", " ".join(f"{s:.2f}" for s in alone), "· loaded:", " ".join(f"{s:.2f}" for s in loaded))
    slowest = sorted(parts.items(), key=lambda kv: -statistics.median(kv[1]))[:3]
    print("slowest callbacks while loaded (median s):",
          "; ".join(f"{name[:60]} {statistics.median(v):.2f}" for name, v in slowest))
    worst = each[loaded.index(max(loaded))]
    print(f"the slowest release while loaded ({max(loaded):.2f} s), by callback:",
          "; ".join(f"{name[:60]} {dt:.2f}" for name, dt in sorted(worst.items(), key=lambda kv: -kv[1])[:4]))


if __name__ == "__main__":
    main()
