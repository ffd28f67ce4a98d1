"""Browser sessions and the owner's role: signed session cookies, the owner link, the server's keys.

Each browser gets a random session id in an HttpOnly cookie signed with the server's secret; the
server keys everything by a hash of it, so nobody can choose or guess a session id. The owner
link (`/owner?token=...`) gives a browser a session signed apart from visitors' and an owner
cookie bound to that session and to the owner token's hash (the token itself is never kept).

One `Sessions` per server, made by the app factory and kept on its Flask app (`install`); a
request reaches it through `current()`. Work a request asked for in another thread or process
runs with that request's role (`acting`).
"""
from __future__ import annotations

import contextvars
import hashlib
import hmac
import os
import re
import secrets
from contextlib import contextmanager
from pathlib import Path

import flask

from .store import RESERVED

COOKIE = "dp_session"
OWNER_COOKIE = "dp_owner"            # marks a browser that opened the owner link (see is_owner)
COOKIE_AGE = 365 * 24 * 3600
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{32}\.[0-9a-f]{32}")    # nonce.hmac, ASCII only
EXTENSION = "dp_sessions"            # the Flask app's extensions entry holding its Sessions


def session_secret(folder) -> bytes:
    """The key that signs session cookies: kept beside the accounts so a restart keeps sessions
    (and their budgets); a fresh random one when accounts live in memory only."""
    if not folder:
        return secrets.token_bytes(32)
    path = Path(folder) / "session.key"
    if not path.exists():                    # written whole, then linked: never seen half-made
        Path(folder).mkdir(parents=True, exist_ok=True)
        tmp = Path(folder) / f"session.key.{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
        try:
            os.link(tmp, path)               # another process may have won the race: keep its key
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    key = path.read_bytes()
    if len(key) < 32:
        raise RuntimeError(f"{path} holds a signing key shorter than 32 bytes; delete it to make a new one")
    return key


def derive_key(secret: bytes, purpose: str) -> bytes:
    """A key of the server for one purpose (signing accounts, the store, published releases),
    derived from its secret: the same in every process, and across restarts."""
    return hmac.new(secret, f"key:{purpose}".encode(), hashlib.sha256).digest()


def owner_hash(token: str) -> str:
    """What the server keeps of the owner token: its SHA-256 (the token is never stored)."""
    return hashlib.sha256(token.encode()).hexdigest()


class Sessions:
    """The cookies and roles of one server: its `secret`, the owner token's hash (None: no owner
    link), whether cookies are Secure even over plain HTTP (behind a TLS proxy) and whether
    visitors may upload files of their own."""

    def __init__(self, secret: bytes, owner_token_hash: str | None = None, secure: bool = False,
                 public_uploads: bool = True):
        self.secret, self.owner_token_hash = secret, owner_token_hash
        self.secure, self.uploads_for_all = secure, public_uploads

    def install(self, server: flask.Flask) -> Sessions:
        """Keep this on the Flask app, give every response without a valid cookie a new one and
        serve the owner link."""
        server.extensions[EXTENSION] = self
        server.after_request(self._set_cookie)
        server.add_url_rule("/owner", "owner_link", self._owner_link)
        return self

    def session_id(self) -> str:
        """This request's session id; a cookie the server did not issue is ignored and replaced."""
        token, kind = flask.request.cookies.get(COOKIE), self._cookie_kind()
        if kind is None:
            token = flask.g.get("new_session") or self._new_token()
            flask.g.new_session = token
            kind = self._kind(token)
        return sid_of(token, kind)

    def has_session(self) -> bool:
        """True when this request carries a session cookie this server issued."""
        return self._cookie_kind() is not None

    def is_owner(self) -> bool:
        """True when this browser opened the owner link (its owner cookie checks out)."""
        mark = flask.request.cookies.get(OWNER_COOKIE)
        return bool(self.owner_token_hash) and isinstance(mark, str) and \
            hmac.compare_digest(mark, self._owner_mark(self.session_id()))

    def _owner_mark(self, sid: str) -> str:
        """The owner cookie's value for a session: bound to the session and to this owner token,
        so a new token (a restart without --owner-token) ends every earlier owner's role."""
        return hmac.new(self.secret, f"owner:{self.owner_token_hash}:{sid}".encode(),
                        hashlib.sha256).hexdigest()

    def _owner_link(self):
        """GET /owner?token=...: a right token makes this browser an owner and opens the
        dashboard; a wrong one is refused in words (nothing else is said about the server)."""
        token = flask.request.args.get("token", "")
        if not self.owner_token_hash or not hmac.compare_digest(owner_hash(token), self.owner_token_hash):
            return flask.Response("<h1>This owner link is not valid for this server.</h1><p>Use the "
                                  "link the server printed when it started (a server started "
                                  "without --owner-token prints a new one each time).</p>", status=403)
        session = self._new_token(owner=True)   # a new session: one someone else knew never becomes an owner's
        response = flask.redirect("/")
        for name, value in ((COOKIE, session), (OWNER_COOKIE, self._owner_mark(sid_of(session, "owner")))):
            response.set_cookie(name, value, max_age=COOKIE_AGE, httponly=True, samesite="Lax",
                                secure=self.secure or flask.request.is_secure)
        flask.g.new_session = session
        return response

    def _sign(self, nonce: str, owner: bool = False) -> str:
        """The HMAC of a session cookie: an owner link's sessions are signed apart from visitors'."""
        text = f"owner-session:{nonce}" if owner else nonce
        return hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest()[:32]

    def _new_token(self, owner: bool = False) -> str:
        nonce = secrets.token_urlsafe(24)
        return f"{nonce}.{self._sign(nonce, owner)}"

    def _kind(self, token) -> str | None:
        """"owner" or "visitor" for a cookie this server issued (the right shape and an HMAC
        that checks out), else None."""
        if not isinstance(token, str) or not TOKEN_SHAPE.fullmatch(token):
            return None
        nonce, mac = token.split(".")
        if hmac.compare_digest(mac, self._sign(nonce)):
            return "visitor"
        return "owner" if hmac.compare_digest(mac, self._sign(nonce, owner=True)) else None

    def _cookie_kind(self) -> str | None:
        """`_kind` of this request's session cookie, checked once per request (the guard, the
        session id and the response's cookie all ask)."""
        if "cookie_kind" not in flask.g:
            flask.g.cookie_kind = self._kind(flask.request.cookies.get(COOKIE))
        return flask.g.cookie_kind

    def _set_cookie(self, response):
        """Give a browser without a valid session cookie a new signed one (HttpOnly, SameSite=Lax)."""
        if self._cookie_kind() is None:
            token = flask.g.get("new_session") or self._new_token()
            response.set_cookie(COOKIE, token, max_age=COOKIE_AGE, httponly=True, samesite="Lax",
                                secure=self.secure or flask.request.is_secure)
        return response


def sid_of(token: str, kind: str | None) -> str:
    """A session id: a hash of the cookie, marked as an owner link's session (`store.RESERVED`,
    which may use the store's share kept from visitors) when the server signed it as one."""
    sid = hashlib.blake2b(token.encode(), digest_size=16).hexdigest()
    return RESERVED + sid if kind == "owner" else sid


def current() -> Sessions:
    """The Sessions of the app serving this request."""
    return flask.current_app.extensions[EXTENSION]


def session_id() -> str:
    """This browser's session id (a hash of its signed cookie); outside a request (a background
    job's thread or process), the session of the request that asked for the work (`acting`)."""
    if not flask.has_request_context():
        sid = _acting_session.get()
        if sid is None:
            raise RuntimeError("no browser session here: run the work under sessions.acting")
        return sid
    return current().session_id()


def has_session() -> bool:
    return current().has_session()


_acting_owner = contextvars.ContextVar("acting_owner", default=False)
_acting_session = contextvars.ContextVar("acting_session", default=None)


def is_owner() -> bool:
    """True when this browser opened the server's owner link. Outside a request (a heavy-pool
    process, an evaluation's thread) it is what the request that asked for the work was
    (`acting`); otherwise (the Python API) False."""
    if not flask.has_request_context():
        return _acting_owner.get()
    return current().is_owner()


@contextmanager
def acting(owner: bool, sid: str | None = None):
    """Run work a request asked for (in another thread or process) with that request's role and,
    when given, its session."""
    token, session = _acting_owner.set(bool(owner)), _acting_session.set(sid)
    try:
        yield
    finally:
        _acting_owner.reset(token)
        _acting_session.reset(session)


def public_uploads() -> bool:
    """True when this browser may upload files of its own (owners always may); always outside a
    served app (the Python API has no visitors)."""
    if not flask.has_app_context():
        return True
    return current().uploads_for_all or is_owner()
