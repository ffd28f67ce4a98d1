"""The command line: `python -m dp release | aggregate | plan | mechanisms`.

A release from a file in one command, for scripts and pipelines:

    python -m dp release trips.csv --mechanism privtree --epsilon 1 --domain "New York" \\
        -o release.geojson

Progress and the ledger go to stderr, results to the named file (or stdout for `plan` and
`mechanisms`). Exit codes: 0 done, 2 a wrong command line, 3 the input data refused, 4
impossible parameters or budget, 5 the output could not be written, 6 an optional package
missing. Messages name what was wrong and what is expected. The files written hold only the
release; stderr, read by the data owner who runs the command, may also say how much of the
data falls inside the box.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from .counts import load_counts
from .domain import Domain
from .errors import BudgetError, DataError, MissingExtra, ParameterError
from .io import load_points
from .mechanisms import mechanisms, release
from .plan import DEFAULT_POINTS, plan, plannable
from .plan import SHAPES as PLAN_SHAPES, TRUST, TRUST_VALUES, WITH_VALUES
from .recommend import recommend
from .points import PointData
from .presets import PRESETS, presets_containing
from .feature_files import EXTENSIONS, release_features, writable, write_features
from .provenance import metadata_text, provenance, software_version
from .io.region_files import load_regions

EXIT_USAGE, EXIT_DATA, EXIT_PARAMS, EXIT_OUTPUT, EXIT_MISSING = 2, 3, 4, 5, 6


class CliError(Exception):
    """A refusal with its exit code; the message is printed as is."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def domain_of(text: str) -> Domain:
    """A preset by name (any case; a unique part of the name is enough, "New York"), or
    "west,south,east,north" in degrees."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) == 4:
        try:
            return Domain(*map(float, parts), name="typed box")
        except ValueError as e:
            raise CliError(f"--domain {text!r}: {e}", EXIT_PARAMS) from None
    exact = [n for n in PRESETS if n.lower() == text.strip().lower()]
    found = exact or [n for n in PRESETS if text.strip().lower() in n.lower()]
    if len(found) == 1:
        return PRESETS[found[0]]
    hint = (f"it matches {len(found)} presets: {', '.join(found[:6])}" if found else
            "no preset has that name (`python -m dp mechanisms --presets` lists them)")
    raise CliError(f"--domain {text!r}: {hint}; or give the box as west,south,east,north in "
                   "degrees, e.g. -74.05,40.60,-73.85,40.90", EXIT_USAGE)


def _params(pairs) -> dict:
    """KEY=VALUE settings; the mechanism checks each one and says what it expects."""
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--param {pair!r}: expected KEY=VALUE, e.g. --param zero_below=5", EXIT_USAGE)
        out[key.strip()] = value.strip()
    return out


def _progress(text: str, quiet: bool):
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def _load(args):
    """The input as the mechanism needs it: counts (.npz), regions (--regions) or points."""
    path = Path(args.data)
    if not path.is_file():
        raise CliError(f"{args.data}: no such file", EXIT_DATA)
    if path.suffix.lower() == ".npz":
        return load_counts(path)
    if args.regions:
        return load_regions(path, user=args.user)
    return load_points(path, lon=args.lon, lat=args.lat, user=args.user)


def _check_box(data, domain: Domain, quiet: bool):
    """Say (to the owner, on stderr) when most points fall outside the box, and which presets
    hold them; only the points inside are counted."""
    if not isinstance(data, PointData) or data.n == 0:
        return
    inside = float(np.mean((data.x >= domain.west) & (data.x <= domain.east)
                           & (data.y >= domain.south) & (data.y <= domain.north)))
    if inside < 0.5:
        fits = [name for name, _ in presets_containing(data.x, data.y)][:3]
        _progress(f"warning: only {inside:.0%} of the points lie inside {domain.name or 'the box'}; "
                  "the release counts only those" + (f" (the points lie in: {', '.join(fits)})" if fits else ""),
                  quiet)


def _ledger_lines(rel) -> list[str]:
    rows = [f"  {e.step}: ε {e.epsilon:.4g}, sensitivity {e.sensitivity:g}"
            + (f", noise scale {e.scale:.4g}" if e.scale else "") for e in rel.ledger]
    return ["ledger:", *rows, f"  total ε {rel.ledger.total:.6g} of {rel.epsilon:g}"]


def _shapes_first(args, domain: Domain):
    """The public shapes asked for, read and checked before anything is released (and so
    before anything is spent): (ids, polygons) or None."""
    if args.shapes is None and args.h3 is None:
        return None
    if args.shapes is not None and args.h3 is not None:
        raise CliError("give either --shapes or --h3, not both", EXIT_USAGE)
    if not args.shapes_output:
        raise CliError(f"--shapes and --h3 need --shapes-output FILE ({EXTENSIONS})", EXIT_USAGE)
    from . import shapes
    return (shapes.h3_cells(domain, args.h3) if args.h3 is not None
            else shapes.load_shapes(args.shapes, shapes.MAX_SHAPES))


def cmd_release(args) -> int:
    for path in (args.output, args.shapes_output):
        if path is not None:
            try:
                writable(path)
            except ValueError as e:
                raise CliError(str(e), EXIT_USAGE) from None
    domain = domain_of(args.domain)
    if args.mechanism is None:               # the recommended one for this kind of data
        args.mechanism = recommend("regions" if args.regions else "points").name
    spec = mechanisms()[args.mechanism]
    if not spec.private and not args.allow_non_private:
        raise CliError(f"{args.mechanism} is NOT differentially private (a reference for "
                       "comparisons): add --allow-non-private to write it anyway, labelled so", EXIT_USAGE)
    wanted = _shapes_first(args, domain)
    _progress(f"reading {args.data} …", args.quiet)
    data = _load(args)
    for note in getattr(data.report, "warnings", []) or []:
        _progress(f"note: {note}", args.quiet)
    _check_box(data, domain, args.quiet)
    _progress(f"releasing with {args.mechanism} at ε = {args.epsilon:g} over {domain.name or 'the box'} …",
              args.quiet)
    rel = release(args.mechanism, data, domain, args.epsilon, params=_params(args.param),
                  max_points_per_user=args.max_points_per_user)
    block = provenance(rel)
    written = _write_features(release_features(rel), args.output, block)
    if args.metadata:
        _write(args.metadata, metadata_text(rel, block))
    for line in _ledger_lines(rel):
        _progress(line, args.quiet)
    if not rel.private:
        _progress("warning: this release is NOT differentially private (labelled so in its file)", False)
    if wanted is not None:
        _write_shapes(rel, args, *wanted)
    _progress("wrote " + " and ".join(written + ([args.metadata] if args.metadata else [])), args.quiet)
    return 0


def _write_features(doc: dict, path: str, block: dict) -> list[str]:
    """`dp.feature_files.write_features`, a failure said as the command line's."""
    import pyarrow as pa
    try:
        return write_features(doc, path, block)
    except (OSError, pa.ArrowException) as e:
        raise CliError(f"{path}: could not write ({getattr(e, 'strerror', None) or e})", EXIT_OUTPUT) from None


def _write_shapes(rel, args, ids, polys):
    """The release's counts per public shape, post-processing of the release, in the format
    the file name asks for."""
    from . import shapes
    counts = shapes.shape_counts(rel, polys, ids)
    _write_features(counts.to_geojson(), args.shapes_output, counts.provenance)
    _progress(f"wrote {args.shapes_output}: {len(ids):,} shapes, each with its count, the range its "
              f"true count lies in ({counts.level:.0%}, any data), a noise-only interval and the "
              "share the release resolves", args.quiet)


def cmd_aggregate(args) -> int:
    from .aggregate import aggregate
    domain = domain_of(args.domain)
    shown = [-1]

    def progress(fraction):
        pct = int(fraction * 100) // 10 * 10
        if pct > shown[0]:
            shown[0] = pct
            _progress(f"counting … {pct}%", args.quiet)
    counts = aggregate(args.source, domain, args.cells, lon=args.lon, lat=args.lat, user=args.user,
                       max_points_per_user=args.max_points_per_user, progress=progress)
    out = args.output if args.output.lower().endswith(".npz") else args.output + ".npz"
    try:
        counts.save(out)
    except OSError as e:
        raise CliError(f"{out}: could not write ({e.strerror or e})", EXIT_OUTPUT) from None
    _progress(f"wrote {out}: counts on a {counts.counts.shape[1]} x {counts.counts.shape[0]} "
              "grid (owner only: exact counts, not a release)", args.quiet)
    return 0


def cmd_plan(args) -> int:
    domain = domain_of(args.domain)
    shapes = WITH_VALUES if args.exact_values else PLAN_SHAPES
    _progress(f"planning on {len(shapes)} public synthetic twins (free: no data read, nothing charged) …",
              args.quiet)
    plans = plan(domain, args.area, args.target, args.level, n_points=args.points, names=args.mechanism,
                 progress=lambda done, total: _progress(f"  {done}/{total} mechanisms", args.quiet),
                 exact_values=args.exact_values)
    print(f"The least ε for rectangles of {args.area:.2%} of the box within ±{args.target:g} people "
          f"{args.level:.0%} of the time, on every one of {len(shapes)} twins of {args.points:,} points "
          f"({', '.join(shapes)}), raised by each mechanism's safety margin (a forecast):")
    for p in plans:
        print(f"  {p.mechanism:15s} " + (f"ε = {p.epsilon:g} (±{p.error:.3g} people on the twins)" if p.met
                                         else f"misses it even at ε = 10 (±{p.error:.3g} people)"))
    print(TRUST_VALUES if args.exact_values else TRUST)
    return 0


def cmd_mechanisms(args) -> int:
    if args.presets:
        for name, d in PRESETS.items():
            print(f"{name}: {d.west:g},{d.south:g},{d.east:g},{d.north:g}")
        return 0
    for name, spec in mechanisms().items():
        print(f"{name:15s} {spec.label} [{spec.data_kind}; {'private' if spec.private else 'NOT private'}]")
        for p in spec.params:
            print(f"    --param {p.name}=…  {p.label} (default {p.default!r})")
    return 0


def _write(path: str, text: str):
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise CliError(f"{path}: could not write ({e.strerror or e})", EXIT_OUTPUT) from None


QUIET = {"action": "store_true", "help": "no progress or ledger on stderr"}


def _point_options(cmd: argparse.ArgumentParser):
    """The options of the commands that read points: columns, the user-level bound, --quiet."""
    cmd.add_argument("--lon", help="the longitude column (found by name when omitted)")
    cmd.add_argument("--lat", help="the latitude column (found by name when omitted)")
    cmd.add_argument("--user", help="a user id column: each user keeps at most --max-points-per-user points")
    cmd.add_argument("--max-points-per-user", type=int, help="the user-level bound k")
    cmd.add_argument("--quiet", "-q", **QUIET)


def parser(prog: str = "python -m dp") -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=prog, description="Differentially private "
                                  "location statistics from the command line.")
    top.add_argument("--version", action="version", version=f"%(prog)s {software_version()}")
    sub = top.add_subparsers(dest="command", required=True)

    r = sub.add_parser("release", help="release a private histogram of a file",
                       description="Release a private histogram of a points CSV / GeoJSON / "
                                   "Parquet file, a regions file (--regions) or counts from "
                                   "`aggregate` (.npz), as GeoJSON with its provenance.")
    r.add_argument("data", help="the input file")
    r.add_argument("--mechanism", "-m", choices=sorted(mechanisms()),
                   help="which mechanism (`python -m dp mechanisms` describes them; default: the "
                        f"recommended one, {recommend('points').name} for points, "
                        f"{recommend('regions').name} for regions)")
    r.add_argument("--epsilon", "-e", type=float, required=True, help="the privacy budget ε")
    r.add_argument("--domain", "-d", required=True,
                   help='the public box: a preset ("New York") or west,south,east,north in '
                        'degrees (write --domain=-74.05,40.6,-73.85,40.9 when it starts with a minus)')
    r.add_argument("--output", "-o", required=True,
                   help=f"the file to write, its type by its extension: {EXTENSIONS} (GeoJSON, "
                        "GeoParquet, GeoPackage, FlatGeobuf, or a plain CSV with the geometry as "
                        "WKT and the provenance beside it in NAME.provenance.json)")
    r.add_argument("--metadata", help="also write the metadata and ledger as JSON here")
    r.add_argument("--param", "-p", action="append", metavar="KEY=VALUE",
                   help="a mechanism setting, repeatable (e.g. -p zero_below=5)")
    r.add_argument("--shapes", metavar="FILE",
                   help="public shapes (a GeoJSON of districts) to count the release in")
    r.add_argument("--h3", type=int, metavar="RES", help="count the release in H3 cells at this resolution")
    r.add_argument("--shapes-output", metavar="FILE",
                   help=f"where the shapes' counts go, by extension as for --output ({EXTENSIONS})")
    r.add_argument("--regions", action="store_true", help="the file holds one region per user")
    r.add_argument("--allow-non-private", action="store_true",
                   help="write a mechanism that is NOT private (a reference), labelled so")
    _point_options(r)
    r.set_defaults(run=cmd_release)

    a = sub.add_parser("aggregate", help="count a large file or many files out of core",
                       description="Count the points of CSV or Parquet files (a glob is fine) on "
                                   "a grid over the public box, out of core, into a .npz that "
                                   "`release` reads. The counts are exact: keep them private.")
    a.add_argument("source", help='a file or a glob, e.g. "trips/*.parquet"')
    a.add_argument("--domain", "-d", required=True, help="the public box (as for release)")
    a.add_argument("--cells", type=int, default=1024, help="cells on the box's longer side")
    a.add_argument("--output", "-o", required=True, help="the .npz file to write")
    _point_options(a)
    a.set_defaults(run=cmd_aggregate)

    p = sub.add_parser("plan", help="the ε each mechanism needs for an accuracy you state (free)",
                       description="Plan before spending: per mechanism, the least ε with which "
                                   "rectangles of --area of the box are within ±--target people "
                                   "--level of the time, forecast on public synthetic twins "
                                   "of --points points in the box (a clustered city, an even "
                                   "spread, tight cores, roads and, unless --no-exact-values, points "
                                   "on exact values: the need must hold on each) (reads no data, "
                                   "charges nothing).")
    p.add_argument("--domain", "-d", required=True, help="the public box (as for release)")
    p.add_argument("--area", type=float, default=0.01, help="the rectangles' share of the box (0.01)")
    p.add_argument("--target", type=float, default=50.0, help="the error you accept, in people (50)")
    p.add_argument("--level", type=float, default=0.95, help="how often it must hold (0.95)")
    p.add_argument("--mechanism", "-m", action="append", choices=plannable(),
                   help="plan only these (repeatable; default: all)")
    p.add_argument("--points", type=int, default=DEFAULT_POINTS,
                   help=f"the assumed number of points, a public guess ({DEFAULT_POINTS:,})")
    p.add_argument("--exact-values", action=argparse.BooleanOptionalAction, default=True,
                   help="plan on twins of exact values and of parallel strips too, for points "
                        "that may sit on exact values (a census table, ages in whole years, a "
                        "street grid); "
                        "--no-exact-values only for points known not to: cheaper plans that "
                        "missed on such data about half the time (default: on)")
    p.add_argument("--quiet", "-q", **QUIET)
    p.set_defaults(run=cmd_plan)

    m = sub.add_parser("mechanisms", help="list the mechanisms and their settings")
    m.add_argument("--presets", action="store_true", help="list the preset boxes instead")
    m.set_defaults(run=cmd_mechanisms)
    return top


def main(argv=None, prog: str = "python -m dp") -> int:
    args = parser(prog).parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:              # `... | head` closed stdout early: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # Python's exit flush too
        return 1
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    except DataError as e:
        print(f"error: the input was refused: {e}", file=sys.stderr)
        return EXIT_DATA
    except (ParameterError, BudgetError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_PARAMS
    except MissingExtra as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_MISSING


def entry() -> None:
    """The `dp-spatial` console command the package installs (the same as `python -m dp`)."""
    sys.exit(main(prog=os.path.basename(sys.argv[0]) or "dp-spatial"))
