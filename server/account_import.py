"""Version 0.10 kept each budget account in a signed JSON file in the accounts folder; a server
finding such files moves them into the database once, as they were: their signatures carry
over, so a damaged, unsigned or rolled-back one stays refused."""
from __future__ import annotations

import hmac
import json
import os
from contextlib import suppress
from pathlib import Path

import sqlalchemy as sa

from . import database
from .account_locks import DATABASE, open_locked
from .accounts import _canonical, _owners
from .database import account_versions as versions_table, accounts as table
from .faults import Unavailable, speaking

IMPORTED = "imported-0.10"      # where 0.10's account files go once they are in the database
VERSIONS_FILE = ".versions"     # 0.10's signed record of versions, read once when importing
RECORD_TAMPERED = ("the budget accounts folder's record of versions does not carry this server's "
                   "signature, so its account files cannot be moved into the database safely: "
                   "restore the record from a backup, or start the server with its own key")


def import_files(accounts) -> None:
    """Move the account files in `accounts.folder` (an `AccountStore`'s) into its database; the
    files then go to `IMPORTED`. Several workers starting at once import them once."""
    folder = accounts.folder
    with speaking(DATABASE):
        files = sorted(folder.glob("*.json"))
        if not files:
            return
        with open_locked(folder / ".import.lock"):
            files = [f for f in files if f.exists()]
            record = _old_record(accounts)
            with accounts.transaction() as conn:
                if accounts.locks.postgres:        # one host at a time (the flock is per host)
                    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(database.MIGRATION_LOCK)))
                have = set(conn.execute(sa.select(table.c.name)).scalars())
                for f in files:
                    name = f.stem
                    if name not in have:
                        conn.execute(table.insert().values(name=name, owners=_owners(name),
                                                           written=f.stat().st_mtime,
                                                           **_old_row(f)))
                database.records_of_charges(conn)     # their charges' releases, as migration 3 did
                have_record = set(conn.execute(sa.select(versions_table.c.name)).scalars())
                for name, version in record.items():
                    if name not in have_record:
                        conn.execute(versions_table.insert().values(
                            name=name, version=version, mac=accounts._version_mac(name, version)))
            (folder / IMPORTED).mkdir(exist_ok=True)
            for f in [*files, folder / VERSIONS_FILE]:
                with suppress(FileNotFoundError):
                    os.replace(f, folder / IMPORTED / f.name)
            for lock in folder.glob("*.lock"):
                if lock.name != ".import.lock":
                    lock.unlink(missing_ok=True)


def _old_record(accounts) -> dict:
    """0.10's record of versions ({} if none), refused unless this server's key signed it."""
    try:
        stored = json.loads((accounts.folder / VERSIONS_FILE).read_bytes())
    except FileNotFoundError:
        return {}
    except ValueError:
        raise Unavailable(RECORD_TAMPERED) from None
    versions = stored.get("versions") if isinstance(stored, dict) else None
    if not (isinstance(versions, dict) and isinstance(stored.get("mac"), str) and hmac.compare_digest(
            stored["mac"].encode(), accounts._mac(VERSIONS_FILE, versions).encode())):
        raise Unavailable(RECORD_TAMPERED)
    return versions


def _old_row(path: Path) -> dict:
    """An account file of 0.10 as a row, kept as it was (a damaged one stays damaged)."""
    raw = path.read_text(errors="replace")
    try:
        stored = json.loads(raw)
    except ValueError:
        return {"body": raw, "version": 0, "mac": ""}
    if not isinstance(stored, dict):
        return {"body": raw, "version": 0, "mac": ""}
    version, mac = stored.get("version"), stored.get("mac")
    account = stored.get("account")
    return {"body": _canonical(account).decode() if isinstance(account, dict) else raw,
            "version": version if isinstance(version, int) and version > 0 else 0,
            "mac": mac if isinstance(mac, str) else ""}
