"""Dash's background callbacks run as the server's jobs (`server.jobs.Jobs`).

A callback declared with `background=True` (with `progress`, `cancel` and `running` as Dash
offers them) starts a job in its session's name instead of running in the request; the page
polls for its progress and result. Dash's own managers start a process per call with no queue,
bound or priority (Diskcache), or need a broker and workers (Celery); this one keeps what the
jobs promise: the owner's jobs never wait behind visitors', visitors' long ones run in the
lowest-priority lane (a quick one, a release, in a thread: `quick`), all bounded per process and
per session for each kind, and any worker process can report or cancel a job because its state
is in the shared store.

Every call is a job of its own, keyed by its session: a poll from another session (a forged or
replayed handle, which Dash's signing already refuses) finds nothing. Cancelling asks the job to
stop after its current step (`stop_requested`), so what it did so far comes back as its result
(an evaluation's partial results) instead of being thrown away. An error the callback raises
reaches the app's `on_error` at the next poll (`raised`), as if the callback had run there; so
does a job refused at its start (the store full or failing, visitors' jobs at their bound),
in the refusal's own words (`refused_handle`), and a store failing while the page polls.
"""
from __future__ import annotations

import base64
import contextvars
import functools
import uuid
from contextlib import suppress

import flask

from dash._callback_context import context_value
from dash._utils import AttributeDict
from dash.background_callback.managers import BaseBackgroundCallbackManager
from dash.exceptions import BackgroundCallbackError, PreventUpdate

from . import services, sessions  # services first: it imports jobs, which needs it
from . import jobs
from .faults import Unavailable

# what a job keeps of Dash's callback context: the callback's inputs and outputs (so
# `ctx.triggered_id` works in it), never the request's cookies or headers
CONTEXT = ("inputs_list", "states_list", "outputs_list", "input_values", "state_values",
           "triggered_inputs", "args_grouping", "using_args_grouping", "outputs_grouping",
           "using_outputs_grouping")
NO_UPDATE = {"_dash_no_update": "_dash_no_update"}    # Dash's mark of a callback that changed nothing
REFUSED = "refused-"     # the handle of a job never started: this, then why in base64 (URL-safe)
STORE_FAILED = ("the server's store stopped answering while this ran: reload the page once it is back "
                "to see what it did (the budget ledger lists every charge)")

_should_stop = contextvars.ContextVar("should_stop", default=None)


def stop_requested(fresh: bool = False) -> bool:
    """In a background callback: True once the page (or the server's shutdown) asked it to
    stop; long work checks this between steps and returns what it has. `fresh` asks the job's
    state now, not as read in the last half second (before a step that cannot be undone)."""
    check = _should_stop.get()
    return bool(check and check(fresh))


def quick(fn):
    """Mark a background callback as quick work (a release): its job runs in a thread of its
    role's pool for visitors too, its heavy part sent to the role's lane of `server.heavy` by
    the work itself, instead of the whole job in the visitors' lowest-priority lane."""
    fn.quick_job = True
    return fn


def run_callback(fn, wants_progress: bool, *, progress, should_stop, args, context):
    """A background callback's body in its job: fn(set_progress, *args), Dash's callback context
    set from `context`, `stop_requested` answering for this job. PreventUpdate becomes Dash's
    no-update mark."""
    dash_context = context_value.set(AttributeDict(**context, updated_props={}, ignore_register_page=True))
    token = _should_stop.set(should_stop)
    try:
        shown = [lambda value: progress.show(list(value) if isinstance(value, (list, tuple)) else [value])]
        return fn(*(shown if wants_progress else []), *args)
    except PreventUpdate:
        return NO_UPDATE
    finally:
        _should_stop.reset(token)
        context_value.reset(dash_context)


def raised(err: Exception) -> Exception:
    """The exception a background callback's job raised, when Dash hands the app's on_error its
    own wrapper of it (BackgroundCallbackError, which keeps only the text); else `err`."""
    if isinstance(err, BackgroundCallbackError) and flask.has_request_context():
        return flask.g.pop("background_error", err)
    return err


def refused_handle(why: str) -> str:
    """A job handle that says why the job was never started (Dash signs it and the page sends
    it back in a URL, so the words travel in URL-safe base64)."""
    return REFUSED + base64.urlsafe_b64encode(why.encode()).decode().rstrip("=")


def refusal(job: str) -> str | None:
    """The words a refused job's handle carries, or None for a job's own handle."""
    if not job.startswith(REFUSED):
        return None
    code = job[len(REFUSED):]
    try:
        return base64.b64decode(code + "=" * (-len(code) % 4), altchars=b"-_", validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None


class JobsManager(BaseBackgroundCallbackManager):
    """The app's background-callback manager: each call a job of the caller's session."""

    def __init__(self, secret: bytes):
        super().__init__(cache_by=None)
        self._secret = sessions.derive_key(secret, "dash-handles")

    def get_or_create_signing_secret(self, generate):
        """The key Dash signs job handles with: derived from the server's, the same in every worker."""
        return self._secret

    def build_cache_key(self, fn, args, cache_args_to_ignore, triggered):
        """A new key per call (Dash's hashes the arguments, the same for two sessions asking the
        same); results are cached, per session, by the callbacks that want it."""
        return uuid.uuid4().hex

    def make_job_fn(self, fn, progress, key=None):
        return functools.partial(run_callback, fn, bool(progress))

    def call_job_fn(self, key, job_fn, args, context):
        """Start the job as `key` in this request's session, in the pool of its callback (so an
        owner's count of saved counts never waits behind its evaluations); a refused one gets a
        handle naming why."""
        kept = {k: context[k] for k in CONTEXT if k in context}
        args = list(args.values()) if isinstance(args, dict) else list(args)
        try:
            fn = job_fn.args[0]
            return services.current().jobs.start(job_fn, owner=sessions.session_id(), job_id=key,
                                                 kind=fn.__name__, quick=getattr(fn, "quick_job", False),
                                                 args=args, context=kept)
        except LookupError as exc:   # (visitors' bound, a full or failing store) the handle says
            return refused_handle(str(exc))     # why, told at the first poll (Dash drops on_error's words now)

    def _status(self, job, quiet: bool = True) -> dict | None:
        """The job's state, or None (refused, no handle, not there, or, when `quiet`, the store
        failing: `get_result` says that)."""
        if not job or job.startswith(REFUSED):
            return None
        try:
            return services.current().jobs.status(job, sessions.session_id())
        except Unavailable:
            if quiet:
                return None
            raise

    def job_running(self, job):
        """Whether the job still runs; taken to run while the store fails (the page polls on).
        Dash asks this after `get_result`: a job `get_result` saw running in this request is
        answered running, though it may have ended since (Dash would take it for cancelled and
        the page would stop polling without its result); the next poll brings the result."""
        if flask.has_request_context() and flask.g.get("background_running") == job:
            return True
        try:
            found = self._status(job, quiet=False)
        except Unavailable:
            return True
        return found is not None and not found["finished"]

    def terminate_job(self, job):
        """Ask the job to stop after its current step (Dash calls this on cancel)."""
        services.current().jobs.cancel(job, sessions.session_id())

    def terminate_unhealthy_job(self, job):
        return False

    def get_progress(self, key):
        found = self._status(key)
        return found["progress"] if found and not found["finished"] else None

    def result_ready(self, key):
        found = self._status(key)
        return bool(found and found["finished"])

    def get_result(self, key, job):
        """The callback's outputs once its job has finished (then forgotten); UNDEFINED while it
        runs, or if it was cancelled before it started. If it raised, was refused, or is not
        there (the store lost it, or the handles are another session's), Dash's error mark, the
        exception kept for the app's on_error (`raised`)."""
        why = refusal(job or "")
        if why is not None:
            return self._error(LookupError(why), why)
        try:
            found = self._status(key, quiet=False)
        except Unavailable:                   # the store failing: the job may have done its work
            return self._error(LookupError(STORE_FAILED), STORE_FAILED)
        if found is None:
            return self._error(LookupError(jobs.LOST), jobs.LOST)
        if not found["finished"]:
            if flask.has_request_context():      # `job_running` answers as read here
                flask.g.background_running = job
            return self.UNDEFINED
        with suppress(Unavailable):           # the result is read: forgetting it may fail
            services.current().jobs.forget(key, sessions.session_id())
        if found["error"]:
            return self._error(found["raised"] or RuntimeError(found["error"]), found["error"])
        if found["result"] is None and found["cancelled"]:
            return self.UNDEFINED
        return found["result"]

    @staticmethod
    def _error(exc: Exception, text: str) -> dict:
        """Dash's mark of a job that failed, `exc` kept for the app's on_error."""
        flask.g.background_error = exc
        return {"background_callback_error": {"msg": text, "tb": ""}}

    def get_updated_props(self, key):
        """Nothing: `set_props` in a background callback is not carried back (none uses it)."""
        return {}
