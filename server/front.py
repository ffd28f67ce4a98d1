"""The HTTP front each gunicorn worker runs: tornado's event loop reads every request whole, with
a read timeout, before one of the worker's request threads runs the app on it.

Why: gunicorn's threaded worker hands a connection to a request thread as soon as it is readable,
and the thread then waits for the rest of the request: fifty clients trickling their requests
held every thread of three workers, and no page loaded for as long as they trickled. Here a slow
client costs a socket and a few kilobytes in the event loop, never a thread; a client that takes
longer than the read timeout to send its headers, or BODY_TIMEOUT to send its body (an upload
of the largest size on a slow link), is disconnected. Bodies are held in memory as they arrive,
so memory grows only with the bytes clients actually send, up to BODY_SLACK times the app's
limit per request (beyond it the connection is closed unread).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from gunicorn.workers.gtornado import TornadoWorker
from tornado.ioloop import IOLoop
from tornado.wsgi import WSGIContainer

READ_TIMEOUT = 60          # seconds a client may take to send a request's headers
BODY_TIMEOUT = 600         # and its body: 67 MB (a 50 MB file) at 1 Mbit/s takes about 9 minutes
BODY_SLACK = 2             # the loop reads bodies up to this many times the app's own limit, so
                           # the app answers most oversize ones in words (413) instead of a cut


def container(wsgi_app, threads: int) -> WSGIContainer:
    """The app behind the event loop: run in a pool of `threads` request threads (made in the
    worker, after the fork)."""
    return WSGIContainer(wsgi_app, executor=ThreadPoolExecutor(threads, thread_name_prefix="request"))


class Worker(TornadoWorker):
    """gunicorn's tornado worker with bounded reads: `read_timeout` seconds for the headers,
    BODY_TIMEOUT (at least as long) for the body, bodies at most BODY_SLACK times the app's
    MAX_CONTENT_LENGTH."""

    read_timeout = READ_TIMEOUT

    def run(self):
        # runs first when the worker's loop starts, after its server exists and before any
        # connection is accepted (the server is made inside TornadoWorker.run)
        IOLoop.current().add_callback(self._bound_reads)
        super().run()

    def _bound_reads(self):
        params = self.server.conn_params
        params.header_timeout = self.read_timeout
        params.body_timeout = max(self.read_timeout, BODY_TIMEOUT)
        limit = self.wsgi.wsgi_application.config.get("MAX_CONTENT_LENGTH")
        if limit:
            params.max_body_size = BODY_SLACK * limit


def worker_class(read_timeout: float = READ_TIMEOUT) -> type:
    """The Worker class gunicorn runs, with this read timeout (seconds)."""
    return type("ReadWholeWorker", (Worker,), {"read_timeout": float(read_timeout)})
