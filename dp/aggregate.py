"""Count points where they live: CSV or Parquet files (a path, a glob or a list) streamed into a
base histogram (`CountData`) without holding the points in memory.

With user ids each user keeps the k points whose hash (of the user id, the point and a salt
drawn from OS entropy for the call) is smallest: which points a user keeps depends on that
user's points alone, never on who else is in the files, so the counts of neighbouring inputs
differ by at most k points, the bound a user-level release is charged for. Who is one user is
decided by `dp.contributions.canonical_user_ids` in both engines, as in memory: each file's id
column at its own type (a Parquet part of numbers and one of text give "8" for 8, 8.0 and "8").

Two engines do the same aggregation. DuckDB (embedded, the default) reads the files out of
core on this machine and streams the coordinates in batches; Dask runs it as a reduction over
the files' partitions, on a local cluster or a real one (`client=`), for data beyond one
machine. Either way the batches are binned by `UniformGrid.histogram`, so a point lands in the
cell it would land in from `dp.load_points`, and points outside the public box are dropped.
"""
from __future__ import annotations

import glob
import os
import queue
import secrets
import threading
from pathlib import Path

import numpy as np

from .contributions import (DEFAULT_POINTS_PER_USER, NO_USER_ID, canonical_user_ids,
                            check_points_per_user, rank_in_group)
from .counts import DEFAULT_CELLS, CountData
from .domain import Domain, UniformGrid
from .errors import DataError, ParameterError
from .io.columns import _columns
from .mechanisms.leaves import square_base_grid
from .points import LoadReport, multiset_hash

ENGINES = ("duckdb", "dask")
OUTSIDE = "outside the box"
BEYOND = "points beyond {k} per user (user-level bound)"
UNUSABLE = "missing or not a number"


def aggregate(source, domain: Domain, cells=DEFAULT_CELLS, *, lon=None, lat=None, user=None,
              max_points_per_user=None, engine: str = "duckdb", progress=None, client=None,
              memory_limit: str = "1GB") -> CountData:
    """Counts of the points in `source` on a grid over the public `domain`, as a CountData.

    `source`: a CSV or Parquet file, a glob ("trips/*.parquet") or a list of files, all of one
    format. `cells`: cells on the box's longer side, square in metres (the trees' base grid),
    or (columns, rows). Columns are found by name as in `dp.load_points`, or given. With a user
    id column (found or given) each user keeps at most `max_points_per_user` points (default
    DEFAULT_POINTS_PER_USER), chosen by a salted hash, and the counts release at user level.
    `progress(fraction)` is called as the work advances. `client`: a dask.distributed Client
    for engine "dask" (default: a local cluster made for the call). `memory_limit` caps DuckDB.
    """
    if engine not in ENGINES:
        raise ParameterError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not isinstance(domain, Domain):
        raise ParameterError(f"domain must be a dp.Domain (a public box), not {type(domain).__name__}")
    if domain.leaky:
        raise ParameterError("counting needs a public box (a preset or one you type); a box fitted "
                             "to the data would leak its edges into every release of the counts")
    files, fmt = _files(source)
    grid = _grid(domain, cells)
    header = _header(files, fmt)
    ilon, ilat, iuser, cols = _columns(header, lon, lat, user)
    if iuser is None and max_points_per_user is not None:
        raise ParameterError(f"max_points_per_user bounds each user's points, but no user id "
                             f"column was found among {', '.join(header)}; expected one named "
                             "user_id, userid, user or uid, or choose it with user=")
    k = None if iuser is None else check_points_per_user(
        DEFAULT_POINTS_PER_USER if max_points_per_user is None else max_points_per_user)
    names = [header[i] for i in (ilon, ilat)] + ([] if iuser is None else [header[iuser]])
    run = _duckdb if engine == "duckdb" else _dask
    counts, read, dropped, points_hash = run(files, fmt, grid, names, k, progress, client=client,
                                             memory_limit=memory_limit)
    report = LoadReport(f"{len(files)} {fmt} file{'s' * (len(files) > 1)} ({engine})", read,
                        int(counts.sum()), columns=cols,
                        dropped={why: n for why, n in dropped.items() if n})
    if k is not None:
        report.notes.append(f"user-level: at most {k} points per user kept, chosen by a salted hash "
                            "(owner-only information, never released)")
    name = Path(files[0]).stem if len(files) == 1 else f"{len(files)} files"
    return CountData(counts, domain, points_per_user=k, report=report, name=name,
                     points_hash=points_hash)


def _files(source) -> tuple[list[str], str]:
    """The files `source` names (path, glob or list) and their one format, csv or parquet."""
    pattern = isinstance(source, (str, os.PathLike))
    items = [os.fspath(source)] if pattern else [os.fspath(f) for f in source]
    files = []
    for item in items:
        found = sorted(glob.glob(item)) if pattern and glob.has_magic(item) else [item]
        files += [f for f in found if os.path.isfile(f)]
        if not found or not all(os.path.isfile(f) for f in found[:1]):
            raise DataError(f"no file matches {item!r}: expected an existing CSV or Parquet "
                            "file, a glob such as 'data/*.parquet' or a list of files")
    if any(glob.has_magic(f) for f in files):     # the engines would expand them once more
        raise DataError("a file name holds *, ? or [: rename it, the engines would read it as "
                        "a pattern")
    if not files:
        raise DataError("no files to aggregate: expected a CSV or Parquet file, a glob or a list")
    kinds = {"parquet" if f.lower().endswith(".parquet") else "csv" for f in files}
    if len(kinds) > 1:
        raise DataError("the files mix CSV and Parquet; aggregate one format at a time")
    return files, kinds.pop()


def _grid(domain: Domain, cells) -> UniformGrid:
    """The base grid: an int is the longer side of square cells, a pair is (columns, rows)."""
    try:
        gx, gy = (cells, None) if np.isscalar(cells) else (int(cells[0]), int(cells[1]))
    except (TypeError, ValueError, IndexError):
        gx, gy = None, None
    if gx is None or int(gx) != gx or gx < 1 or (gy is not None and gy < 1):
        raise ParameterError(f"cells must be a whole number of at least 1 (the longer side) or a "
                             f"pair (columns, rows), got {cells!r}")
    grid = square_base_grid(domain, int(gx)) if gy is None else UniformGrid(domain, gx, gy)
    CountData.check_size(grid.gx, grid.gy)
    return grid


def _header(files: list[str], fmt: str) -> list[str]:
    """The column names of the first file (the others must have the same)."""
    import duckdb

    reader = "read_parquet(?)" if fmt == "parquet" else "read_csv(?, header = true, all_varchar = true)"
    try:
        with duckdb.connect() as con:
            return [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {reader}", [files[0]]).fetchall()]
    except duckdb.Error as e:
        raise DataError(f"{files[0]} could not be read as {fmt.upper()}: {_first_line(e)}") from None


def _first_line(e: Exception) -> str:
    """An engine's error in one short line, for a message to the data owner."""
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


# ---------------------------------------------------------------------------------- DuckDB
BATCH_ROWS = 1 << 20       # rows per batch streamed out of DuckDB: about 16 MB of coordinates
BIN_THREADS = 2            # threads binning DuckDB's batches; 1e8 points on 2 cores: one 8.4 s,
                           # two 4.8 s, three 5.8 s (`benchmarks/scale.py`; DuckDB's read 1.2 s)
PARQUET_READ_THREADS = 1   # DuckDB's threads reading Parquet while BIN_THREADS bin (no user bound)
THREADED_CELLS = 1 << 22   # on finer grids one thread bins (a tally per thread: 32 MB at this size)
BLOCK = "64MiB"            # bytes of file per Dask partition: a worker holds a few of them
BLOCK_BYTES = 64 << 20     # the same, for Parquet row groups read without a data frame
UID = "__user__"           # the canonical user id column Dask partitions on
# id column types DuckDB hands to `canonical_user_ids` as they are (it writes numbers as text
# by the rule); any other type is cast to VARCHAR by DuckDB first
NATIVE_ID_TYPES = ("VARCHAR", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                   "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE")    # and DECIMAL(p, s)
KEEP, BEYOND_K, NO_ID = 0, 1, 2    # why a row is (not) kept by the per-user bound


def _duckdb(files, fmt, grid, names, k, progress, *, memory_limit, **_):
    """DuckDB reads the files out of core (and bounds each user's points, which needs all of a
    user's rows at once) and streams the coordinates in batches, binned here by `_Tally`."""
    import duckdb

    con = duckdb.connect(config={"memory_limit": memory_limit})
    con.execute("SET enable_progress_bar = false")     # no bar printed; query_progress still works
    if fmt == "parquet" and k is None:
        # decoding Parquet is the light half: a second DuckDB thread only competes with the
        # binning threads for the cores (1e8 points on 2 cores: 2.5 s with one, 3.3 s with two);
        # CSV parsing and the user bound's ranking are heavy, so they keep DuckDB's threads
        con.execute(f"SET threads = {PARQUET_READ_THREADS}")
    typed = ", ".join(f"{_literal(c)}: 'DOUBLE'" for c in names[:2])

    def reader(param: str) -> str:
        return (f"read_parquet(${param})" if fmt == "parquet" else
                f"read_csv(${param}, header = true, all_varchar = true, types = {{{typed}}}, "
                "store_rejects = true)")      # a row with a non-number is set aside, counted

    x, y = (f"TRY_CAST({_quote(c)} AS DOUBLE)" for c in names[:2])
    tally = _Tally(grid, k)
    try:
        # the files in groups of one type per column, each read at its own types
        parts, params = [], {"salt": secrets.token_hex(8)} if k is not None else {}
        for i, (kinds, group) in enumerate(_typed_groups(con, files, fmt, names)):
            params[f"files_{i}"] = group
            if k is None:
                parts.append(f"SELECT {x} AS x, {y} AS y FROM {reader(f'files_{i}')}")
                continue
            kind = kinds[2]            # each id made canonical as it is read
            native = kind in NATIVE_ID_TYPES or kind.startswith("DECIMAL")
            uid = _quote(names[2]) if native else f"CAST({_quote(names[2])} AS VARCHAR)"
            con.create_function(f"dp_user_id_{i}", canonical_user_ids,   # an Arrow vector a call
                                [kind if native else "VARCHAR"], "VARCHAR", type="arrow",
                                null_handling="special", side_effects=False)
            parts.append(f"SELECT {x} AS x, {y} AS y, dp_user_id_{i}({uid}) AS uid "
                         f"FROM {reader(f'files_{i}')}")
        union = " UNION ALL ".join(parts)
        if k is None:
            sql = union
        else:
            sql = f"""
                WITH raw AS ({union}),
                ranked AS (SELECT x, y, uid, row_number() OVER (
                               PARTITION BY uid ORDER BY hash(uid, x, y, $salt)) AS r FROM raw)
                SELECT x, y, CASE WHEN uid IS NULL OR uid = '' THEN {NO_ID}
                                  WHEN r > {int(k)} THEN {BEYOND_K} ELSE {KEEP} END AS why
                FROM ranked"""
        expected = _expected_rows(con, files, fmt) if progress else 1
        from .io.arrow_values import _floats_of    # not at import: `import dp` loads no pyarrow
        # coordinates as views, a null (text TRY_CAST could not read) as NaN: pyarrow's own
        # `to_numpy` would import pandas
        batches = ([_floats_of(c) for c in batch.columns[:2]] + [c.to_numpy() for c in batch.columns[2:]]
                   for batch in con.sql(sql, params=params).to_arrow_reader(BATCH_ROWS))
        _bin_in_threads(batches, tally, progress, expected)
        if fmt == "csv":
            rejected = con.execute("SELECT count(DISTINCT (file_id, line)) FROM reject_errors").fetchall()[0][0]
            tally.unusable += rejected
            tally.read += rejected
    except duckdb.Error as e:
        raise DataError(f"the files could not be read as {fmt.upper()}: {_first_line(e)}") from None
    finally:
        con.close()
    if progress:
        progress(1.0)
    return tally.result()


def _bin_in_threads(batches, tally: _Tally, progress, expected: int) -> None:
    """Add each batch (x, y[, why]) to `tally`, binned in BIN_THREADS threads with a tally each
    (numpy lets go of the interpreter lock while it bins; one thread above THREADED_CELLS), while
    this thread reads the next batches; their tallies are added to `tally` at the end. A
    thread's error is raised here."""
    threads = BIN_THREADS if tally.grid.n_cells <= THREADED_CELLS else 1
    work: queue.Queue = queue.Queue(2 * threads)         # batches read ahead: a few, not the file
    tallies = [_Tally(tally.grid, tally.k) for _ in range(threads)]
    failed: list = []

    def binner(own: _Tally) -> None:
        while (batch := work.get()) is not None:
            if not failed:                  # after an error the rest is drained, never binned
                try:
                    own.add(*batch)
                except BaseException as e:  # raised in the reading thread
                    failed.append(e)
    binners = [threading.Thread(target=binner, args=(t,), daemon=True) for t in tallies]
    for t in binners:
        t.start()
    try:
        for batch in batches:
            work.put(batch)
            if failed:
                break
            if progress:
                progress(min(sum(t.read for t in tallies) / expected, 0.99))
    finally:
        for _ in binners:
            work.put(None)
        for t in binners:
            t.join()
    if failed:
        raise failed[0]
    for own in tallies:
        tally.absorb(own)


def _typed_groups(con, files: list[str], fmt: str, columns: list[str]) -> list[tuple[list[str], list[str]]]:
    """The files in groups whose `columns` have one DuckDB type each, with those types: DuckDB
    reads a list of Parquet files at the first one's types, so a part of text after one of
    numbers stops the read, and an id 8.0 after a part of text would read "8.0", not the "8" it
    is alone. CSV is read as text: one group."""
    if fmt == "csv":
        return [(["VARCHAR"] * len(columns), files)]
    rows = con.execute("SELECT file_name, name, type, converted_type, logical_type::VARCHAR "
                       "FROM parquet_schema($files) WHERE list_contains($columns, name)",
                       {"files": files, "columns": columns}).fetchall()
    physical: dict = {}
    for f, name, *kind in rows:
        physical.setdefault(f, {})[name] = tuple(kind)
    groups: dict = {}
    for f in files:        # a file without a column keeps its own group: reading it says why
        found = physical.get(f, {})
        groups.setdefault(tuple(found.get(c, ("missing", f)) for c in columns), []).append(f)
    out = []
    for group in groups.values():
        described = con.execute(f"DESCRIBE SELECT {', '.join(map(_quote, columns))} FROM "
                                "read_parquet($files)", {"files": group[:1]}).fetchall()
        out.append(([row[1] for row in described], group))
    return out


class _Tally:
    """Counts per cell of streamed coordinates, binned by UniformGrid.histogram, and the rows
    left out by reason; NaN (a missing or unreadable coordinate) is not a number."""

    def __init__(self, grid: UniformGrid, k: int | None):
        self.grid, self.k = grid, k
        self.counts = np.zeros(grid.shape)
        self.read = self.unusable = self.outside = self.beyond = self.no_id = 0
        self.hash = np.zeros(3, dtype=np.uint64)      # multiset_hash of every usable point

    def add(self, x: np.ndarray, y: np.ndarray, why: np.ndarray | None = None) -> None:
        usable = ~(np.isnan(x) | np.isnan(y))
        every = bool(usable.all())        # the common case: no masked copies, no mask to bin by
        self.hash += np.frombuffer(multiset_hash(x, y) if every else multiset_hash(x[usable], y[usable]),
                                   dtype="<u8")                       # wraps mod 2^64
        if why is None:
            keep = None if every else usable
            self.unusable += x.size - int(np.count_nonzero(usable))
        else:
            keep = why == KEEP
            self.beyond += int(np.count_nonzero(why == BEYOND_K))
            self.no_id += int(np.count_nonzero(why == NO_ID))
            self.unusable += int(np.count_nonzero(keep & ~usable))
            keep &= usable
        counts = self.grid.histogram(x, y, keep)
        self.counts += counts
        kept = x.size if keep is None else int(np.count_nonzero(keep))
        self.outside += kept - int(counts.sum())                          # kept, but not in the box
        self.read += x.size

    def absorb(self, other: _Tally) -> None:
        """Add another tally of the same grid (another thread's batches) to this one."""
        self.counts += other.counts
        self.hash += other.hash                       # wraps mod 2^64, as multiset_hash's sums
        for name in ("read", "unusable", "outside", "beyond", "no_id"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def dropped(self) -> dict:
        out = {UNUSABLE: self.unusable, OUTSIDE: self.outside}
        if self.k is not None:
            out[BEYOND.format(k=self.k)] = self.beyond
            out[NO_USER_ID] = self.no_id
        return out

    def result(self) -> tuple[np.ndarray, int, dict, bytes]:
        """(counts, rows read, rows dropped by reason, the points' hash)."""
        return self.counts.astype(np.int64), self.read, self.dropped(), self.hash.astype("<u8").tobytes()


def _expected_rows(con, files: list[str], fmt: str) -> int:
    """Rows the files hold, for progress: Parquet's metadata, or for CSV the files' size over
    the bytes per line of the first file's head."""
    if fmt == "parquet":
        return int(con.execute("SELECT sum(num_rows) FROM parquet_file_metadata($files)",
                               {"files": files}).fetchall()[0][0] or 1)
    with open(files[0], "rb") as f:
        head = f.read(1 << 16)
    per_line = len(head) / max(head.count(b"\n"), 1)
    return max(int(sum(os.path.getsize(f) for f in files) / per_line), 1)


def _quote(name: str) -> str:
    """A column name as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    """A string as an SQL literal."""
    return "'" + text.replace("'", "''") + "'"


# ------------------------------------------------------------------------------------ Dask
def _dask(files, fmt, grid, names, k, progress, *, client=None, **_):
    """The same counts as a Dask reduction: each partition binned where it lives, only its
    non-empty cells sent back and added up here, progress as partitions finish."""
    import dask
    import pyarrow as pa
    from distributed import Client, LocalCluster, as_completed

    unreadable = (ValueError, OSError, KeyError, pa.ArrowException)
    try:
        if fmt == "parquet" and k is None:     # row groups read straight into arrays: no data frames
            tasks = [dask.delayed(_count_row_groups)(path, groups, grid, names)
                     for path, groups in _parquet_pieces(files)]
        else:
            tasks = _partition_tasks(files, fmt, grid, names, k)
    except unreadable as e:
        raise DataError(f"the files could not be read as {fmt.upper()}: {_first_line(e)}") from None
    cluster = None
    if client is None:
        cluster = LocalCluster(n_workers=min(os.cpu_count() or 1, 4), threads_per_worker=1,
                               dashboard_address=None)
        client = Client(cluster)
    counts = np.zeros(grid.n_cells, dtype=np.int64)
    points_hash = np.zeros(3, dtype=np.uint64)
    dropped: dict = {}
    read = 0
    try:
        futures = client.compute(tasks)
        for i, future in enumerate(as_completed(futures), 1):
            cells, n, rows, why, part_hash = future.result()
            counts[cells] += n          # a partition's cells are distinct
            points_hash += np.frombuffer(part_hash, dtype="<u8")
            read += rows
            for reason, m in why.items():
                dropped[reason] = dropped.get(reason, 0) + m
            if progress is not None:
                progress(i / len(futures))
    except unreadable as e:
        raise DataError(f"the files could not be read as {fmt.upper()}: {_first_line(e)}") from None
    finally:
        if cluster is not None:
            client.close()
            cluster.close()
    return counts.reshape(grid.gy, grid.gx), read, dropped, points_hash.astype("<u8").tobytes()


def _sent_back(tally: _Tally):
    """What a Dask task returns: (non-empty cells, their counts, rows read, dropped by reason,
    the points' hash)."""
    counts, read, dropped, points_hash = tally.result()
    flat = counts.ravel()
    cells = np.flatnonzero(flat)
    return cells, flat[cells], read, dropped, points_hash


def _partition_tasks(files, fmt, grid, names, k) -> list:
    """A Dask data frame's partitions binned by `_count_partition` (CSV, or with a user bound:
    the rows shuffled so each user's points meet in one partition)."""
    import dask
    import dask.dataframe as dd

    frame = (dd.read_parquet(files, columns=names, split_row_groups="adaptive", blocksize=BLOCK)
             if fmt == "parquet" else    # text as written: no "NA", "#N/A" or "" made missing
             dd.read_csv(files, usecols=names, dtype=str, blocksize=BLOCK, keep_default_na=False))
    if k is not None:      # the canonical id first: " u1" and "u1" are one user, in one partition
        uid = frame[names[2]].map_partitions(_canonical_series, meta=(UID, "string"))
        frame = frame.assign(**{UID: uid}).drop(columns=[names[2]]).shuffle(on=UID)
    salt = secrets.token_hex(8)
    return [dask.delayed(_count_partition)(part, grid, names, k, salt) for part in frame.to_delayed()]


def _parquet_pieces(files) -> list[tuple[str, list[int]]]:
    """(file, its row groups) in pieces of about BLOCK_BYTES of data each, from the files' footers."""
    import pyarrow.parquet as pq
    pieces = []
    for path in files:
        meta = pq.ParquetFile(path).metadata
        groups, size = [], 0
        for i in range(meta.num_row_groups):
            groups.append(i)
            size += meta.row_group(i).total_byte_size
            if size >= BLOCK_BYTES:
                pieces.append((path, groups))
                groups, size = [], 0
        if groups:
            pieces.append((path, groups))
    return pieces


def _count_row_groups(path: str, groups: list[int], grid: UniformGrid, names):
    """`_count_partition`'s result for row groups of one Parquet file, read in batches with
    pyarrow: numeric columns as float views, text ones parsed as Python's float() reads them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .io.arrow_values import _floats, _floats_of

    def values(column: pa.Array) -> np.ndarray:
        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_decimal(column.type):
            return _floats_of(column)
        return _floats([column.cast(pa.string())])[0]
    tally = _Tally(grid, None)
    for batch in pq.ParquetFile(path).iter_batches(BATCH_ROWS, row_groups=groups, columns=names[:2]):
        tally.add(values(batch.column(names[0])), values(batch.column(names[1])))
    return _sent_back(tally)


def _canonical_series(ids):
    """A partition's ids (at the type its file has: parts of numbers and of text may mix) as
    canonical ids (`canonical_user_ids`), '' where there is none."""
    out = canonical_user_ids(ids).to_pandas().astype("string")
    out.index, out.name = ids.index, UID      # the partition's rows, in order (not realigned)
    return out


def _count_partition(frame, grid: UniformGrid, names, k, salt: str):
    """(cells, counts, rows read, dropped by reason, hash) of one partition, binned by `_Tally`; with
    a user bound each user keeps the k points of smallest salted hash, as in DuckDB."""
    import pandas as pd

    x = pd.to_numeric(frame[names[0]], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    y = pd.to_numeric(frame[names[1]], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    why = None
    if k is not None:
        uid = frame[UID]
        known = (uid != "").to_numpy(bool)           # canonical: '' where there is no id
        pick = pd.util.hash_pandas_object(pd.DataFrame({"u": uid, "x": x, "y": y}), index=False,
                                          hash_key=salt).to_numpy()
        rank = rank_in_group(pd.factorize(uid)[0], pick)
        why = np.where(~known, NO_ID, np.where(rank >= k, BEYOND_K, KEEP))
    tally = _Tally(grid, k)
    for s in range(0, x.size, BATCH_ROWS):      # small temporaries, as for DuckDB's batches
        tally.add(x[s:s + BATCH_ROWS], y[s:s + BATCH_ROWS], None if why is None else why[s:s + BATCH_ROWS])
    return _sent_back(tally)
