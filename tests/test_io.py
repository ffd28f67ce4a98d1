"""The upload loader: every DataError says what was wrong AND what was expected; CSV column
detection, delimiters, quoting and user ids; GeoJSON points and multipoints."""
from __future__ import annotations

import json

import numpy as np
import pytest

import dp
from dp.errors import DataError


def load_error(raw, **kw) -> str:
    """The lower-cased DataError message for loading `raw`."""
    kw.setdefault("filename", "upload.csv")
    with pytest.raises(DataError) as exc:
        dp.load_points(raw, **kw)
    return str(exc.value).lower()


def assert_says(msg: str, *parts: str):
    for p in parts:
        assert p.lower() in msg, f"{p!r} not in message {msg!r}"


def csv_rows(rows, header=b"lon,lat") -> bytes:
    return header + b"\n" + b"".join(r + b"\n" for r in rows)


GOOD = [b"%.3f,%.3f" % (10 + i / 100, 50 + i / 100) for i in range(20)]


def feature(geometry, **props) -> dict:
    return {"type": "Feature", "geometry": geometry, "properties": props}


def collection(*features) -> bytes:
    return json.dumps({"type": "FeatureCollection", "features": list(features)}).encode()


def point(x, y) -> dict:
    return {"type": "Point", "coordinates": [x, y]}


# --------------------------------------------------------------------------- empty input
@pytest.mark.parametrize("raw", [b"", b"   \n\n  \r\n", b"\xef\xbb\xbf", b"\xff\xfe"],
                         ids=["zero-bytes", "whitespace", "utf8-bom-only", "utf16-bom-only"])
def test_empty_file(raw):
    msg = load_error(raw)
    assert_says(msg, "empty", "expected", "header row", "lon,lat")


def test_empty_file_on_disk(tmp_path):
    path = tmp_path / "points.csv"
    path.write_bytes(b"")
    assert_says(load_error(str(path), filename=None), "empty", "expected")


def test_header_only():
    for raw in (b"lon,lat\n", b"lon,lat\n\n\n", b"\xef\xbb\xbflon,lat\r\n"):
        assert_says(load_error(raw), "header", "no data rows", "expected", "one point per line")


def test_first_line_is_data_not_header():
    msg = load_error(b"1.5,2.5\n3,4\n")
    assert_says(msg, "no column names", "expected a header row", "lon,lat")


# ------------------------------------------------------------------------ column detection
def test_no_coordinate_columns():
    msg = load_error(b"name,value\na,1\nb,2\n")
    assert_says(msg, "no longitude and latitude column", "name, value",          # what was found
                "expected", "lon/lng/longitude/x", "lat/latitude/y")             # what was expected


def test_only_latitude_missing():
    msg = load_error(b"lon,value\n1,1\n2,2\n")
    assert_says(msg, "no latitude column", "lon, value", "expected")
    assert "no longitude" not in msg


@pytest.mark.parametrize("lon_name, lat_name", [
    ("lon", "lat"), ("lng", "lat"), ("long", "latitude"), ("longitude", "latitude"), ("x", "y"),
    ("LON", "LAT"), ("Lng", "Latitude"), ("LONGITUDE", "LATITUDE"), ("X", "Y"), (" Long ", " Lat "),
])
def test_column_names_detected_any_case(lon_name, lat_name):
    raw = f"id,{lat_name},name,{lon_name}\n1,51.5,a,-0.1\n2,48.9,b,2.35\n".encode()
    data = dp.load_points(raw, filename="p.csv")
    assert sorted(zip(data.x.tolist(), data.y.tolist())) == [(-0.1, 51.5), (2.35, 48.9)]
    assert data.report.columns["lon"] == lon_name.strip()
    assert data.report.columns["lat"] == lat_name.strip()


def test_explicit_columns_by_name_and_index():
    raw = b"a,b,c\n1,51.5,-0.1\n2,48.9,2.35\n"
    for lon, lat in (("c", "b"), ("C", "B"), (2, 1)):
        data = dp.load_points(raw, filename="p.csv", lon=lon, lat=lat)
        assert sorted(zip(data.x.tolist(), data.y.tolist())) == [(-0.1, 51.5), (2.35, 48.9)]
        assert data.report.columns == {"lon": "c", "lat": "b"}


def test_explicit_columns_override_detection():
    raw = b"lon,lat,lon2,lat2\n0,0,1.5,2.5\n0,0,3,4\n"
    data = dp.load_points(raw, filename="p.csv", lon="lon2", lat="lat2")
    assert sorted(data.x.tolist()) == [1.5, 3.0]


def test_explicit_column_errors():
    raw = b"a,b,c\n1,1.5,2.5\n2,3,4\n"
    assert_says(load_error(raw, lon=5, lat=1), "index 5 is out of range", "3 columns", "a, b, c")
    assert_says(load_error(raw, lon="zz", lat="b"), "no column named 'zz'", "longitude", "a, b, c")
    assert_says(load_error(raw, lon="b", lat="b"), "both point to column 'b'")


# ---------------------------------------------------------------------- delimiters, quoting
@pytest.mark.parametrize("delim", [b",", b";", b"\t", b"|"], ids=["comma", "semicolon", "tab", "pipe"])
def test_delimiters(delim):
    raw = b"name" + delim + b"lon" + delim + b"lat\n" + b"a" + delim + b"-0.1" + delim + b"51.5\n" + \
        b"b" + delim + b"2.35" + delim + b"48.9\n"
    data = dp.load_points(raw, filename="p.tsv" if delim == b"\t" else "p.csv")
    assert sorted(zip(data.x.tolist(), data.y.tolist())) == [(-0.1, 51.5), (2.35, 48.9)]


def test_quoted_values_and_header():
    raw = b'"lon","lat","name"\n"-0.1","51.5","Smith, J"\n"2.35","48.9","Doe; A"\n'
    data = dp.load_points(raw, filename="p.csv")
    assert sorted(zip(data.x.tolist(), data.y.tolist())) == [(-0.1, 51.5), (2.35, 48.9)]


def test_quoted_text_containing_the_delimiter():
    raw = b'name,lon,lat\n"Smith, J",-0.1,51.5\n"A",2.35,48.9\n'
    data = dp.load_points(raw, filename="p.csv")
    assert sorted(data.x.tolist()) == [-0.1, 2.35]


def test_crlf_bom_and_utf16_text():
    text = "lon,lat\r\n-0.1,51.5\r\n2.35,48.9\r\n"
    for raw in (text.encode(), text.encode("utf-8-sig"), text.encode("utf-16")):
        data = dp.load_points(raw, filename="p.csv")
        assert data.n == 2 and sorted(data.x.tolist()) == [-0.1, 2.35]


# ------------------------------------------------------------------------------- user ids
def test_user_id_column_detected_and_explicit():
    raw = b"user_id,lon,lat\nu1,-0.1,51.5\nu2,2.35,48.9\n"
    data = dp.load_points(raw, filename="p.csv")
    assert dict(zip(data.x.tolist(), data.user.tolist())) == {-0.1: "u1", 2.35: "u2"}
    assert data.report.columns["user"] == "user_id"
    raw = b"who,lon,lat\nu1,-0.1,51.5\nu2,2.35,48.9\n"
    assert dp.load_points(raw, filename="p.csv").user is None
    data = dp.load_points(raw, filename="p.csv", user="who")
    assert dict(zip(data.x.tolist(), data.user.tolist())) == {-0.1: "u1", 2.35: "u2"}


def test_user_ids_stay_aligned_when_rows_are_dropped():
    rows = [b"u%d,%d,%d" % (i, i, i) for i in range(10)] + [b"bad,zz,1"]
    data = dp.load_points(csv_rows(rows, header=b"uid,lon,lat"), filename="p.csv")
    assert data.n == 10
    assert all(u == f"u{int(x)}" for x, u in zip(data.x, data.user))


# -------------------------------------------------------------------- bad and dropped rows
def test_mostly_non_numeric_is_refused():
    msg = load_error(csv_rows([b"abc,1", b"x,2", b"3,4"]))
    assert_says(msg, "2 of 3 rows", "non-numeric", "first bad row", "abc,1",      # what was wrong
                "expected longitude in [-180, 180] and latitude in [-90, 90]", "decimal degrees")


def test_few_non_numeric_rows_are_dropped_and_counted():
    data = dp.load_points(csv_rows(GOOD + [b"abc,3", b"1,n/a"]), filename="p.csv")
    assert data.n == 20
    assert data.report.rows_read == 22 and data.report.rows_loaded == 20
    assert data.report.dropped == {"rows with a non-numeric coordinate": 2}
    assert "2 rows with a non-numeric coordinate" in data.report.summary()


def test_missing_and_short_rows_are_dropped_and_counted():
    data = dp.load_points(csv_rows(GOOD + [b"1,", b"7"]), filename="p.csv")
    assert data.n == 20
    assert data.report.dropped == {"rows with a missing coordinate": 1, "rows with too few fields": 1}
    # one of each, said once each and in the singular (issue 44: "1 rows", said twice on the page)
    assert data.report.summary().endswith("dropped: 1 row with too few fields; 1 row with a missing coordinate")


@pytest.mark.parametrize("bad", [[b"nan,1", b"inf,2"], [b"1,-inf", b"NaN,NaN"]])
def test_nan_inf_mostly_refused(bad):
    msg = load_error(csv_rows(bad))
    assert_says(msg, "2 of 2 rows", "nan or infinite", "expected longitude in [-180, 180]")


def test_nan_inf_few_dropped_and_counted():
    data = dp.load_points(csv_rows(GOOD + [b"nan,1", b"2,inf"]), filename="p.csv")
    assert data.n == 20 and np.all(np.isfinite(data.x)) and np.all(np.isfinite(data.y))
    assert data.report.dropped == {"rows with NaN or infinite coordinates": 2}


def test_every_dropped_row_is_counted_with_mixed_reasons():
    # a non-numeric row and a NaN row in the same file: both are dropped AND both are counted
    data = dp.load_points(csv_rows(GOOD + [b"abc,3", b"nan,4", b"500,1"]), filename="p.csv")
    rep = data.report
    assert data.n == 20
    assert rep.rows_read - rep.rows_loaded == rep.rows_dropped == 3
    assert rep.dropped == {"rows with a non-numeric coordinate": 1,
                           "rows with NaN or infinite coordinates": 1,
                           "rows with longitude outside [-180, 180]": 1}


def test_latitude_out_of_range():
    msg = load_error(csv_rows([b"10,100", b"10,-95"]))
    assert_says(msg, "2 of 2 rows", "latitude outside [-90, 90]", "expected", "latitude in [-90, 90]")
    data = dp.load_points(csv_rows(GOOD + [b"10,91"]), filename="p.csv")
    assert data.report.dropped == {"rows with latitude outside [-90, 90]": 1}


def test_longitude_out_of_range():
    msg = load_error(csv_rows([b"190,10", b"-200,20"]))
    assert_says(msg, "2 of 2 rows", "longitude outside [-180, 180]", "expected longitude in [-180, 180]")
    assert "swapped" not in msg
    data = dp.load_points(csv_rows(GOOD + [b"180.5,10"]), filename="p.csv")
    assert data.report.dropped == {"rows with longitude outside [-180, 180]": 1}


def test_swapped_columns_hint():
    # US points written as lat,lon under a lon,lat header: latitudes like -120 look like longitudes
    msg = load_error(csv_rows([b"40.7,-120.0", b"41.0,-121.0", b"37.8,-122.4"]))
    assert_says(msg, "latitude outside [-90, 90]", "swapped")


def test_boundary_values_are_valid():
    data = dp.load_points(csv_rows([b"-180,-90", b"180,90", b"0,0"]), filename="p.csv")
    assert data.n == 3


# ------------------------------------------------------------------ encoding and binaries
@pytest.mark.parametrize("encoding, name", [
    ("utf-16-le", "UTF-16 (little-endian)"), ("utf-16-be", "UTF-16 (big-endian)"),
    ("utf-16", "UTF-16"), ("utf-32", "UTF-32"), ("cp1252", "Windows-1252 (Latin-1)")])
def test_other_text_encodings_are_read_and_named(encoding, name):
    raw = "lon,lat,user\n2.35,48.85,café\n2.36,48.86,né\n".encode(encoding)
    data = dp.load_points(raw, filename="upload.csv")
    assert data.n == 2 and sorted(data.user) == ["café", "né"]
    assert data.report.warnings[0] == (f"the file is {name} text rather than the expected UTF-8; "
                                       "it was decoded as such: check that the column names and "
                                       "ids look right")


def test_utf8_file_has_no_encoding_warning_and_nul_bytes_are_refused():
    rows = "".join(f"{i / 100},{i / 100}\n" for i in range(60))
    assert dp.load_points(("lon,lat\n" + rows).encode(), filename="a.csv").report.warnings == []
    msg = load_error(b"lon,lat\n1\x00,2\n3,4\n")
    assert_says(msg, "binary (nul) bytes", "expected csv text")


def test_ambiguous_columns_and_tiny_data_are_flagged_in_plain_words():
    data = dp.load_points(b"x,y,z\n1,2,3\n", filename="xyz.csv")
    assert (data.x.tolist(), data.y.tolist()) == ([1.0], [2.0])
    generic, tiny = data.report.warnings
    assert "columns named 'x' and 'y'" in generic and "longitude and latitude in degrees" in generic
    assert tiny.startswith("only 1 point: ") and "mostly noise" in tiny
    named = dp.load_points(b"x,y\n1,2\n", filename="xy.csv", lon="x", lat="y")
    assert not any("columns named" in w for w in named.report.warnings)   # chosen explicitly


@pytest.mark.parametrize("raw, filename, what", [
    (b"PK\x03\x04\x14\x00\x06\x00rest-of-workbook", "points.xlsx", "zip archive"),
    (b"PK\x03\x04\x14\x00\x06\x00rest-of-workbook", "points.csv", "zip archive"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "map.png", "png image"),
    (b"%PDF-1.7\n", "report.csv", "pdf"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "old.xls", "excel"),
    (b"\x1f\x8b\x08\x00", "points.csv", "gzip"),
])
def test_binary_files(raw, filename, what):
    msg = load_error(raw, filename=filename)
    assert_says(msg, what, "not text", "expected a csv", "geojson")


def test_nul_bytes():
    assert_says(load_error(b"lon,lat\n1,2\x00\x00\n"), "binary", "expected csv text or geojson")


# --------------------------------------------------------------------- format and sources
def test_unknown_extension():
    msg = load_error(b"lon,lat\n1,2\n", filename="points.shp")
    assert_says(msg, "unknown file type '.shp'", "expected .csv", ".geojson")


def test_unknown_explicit_format():
    assert_says(load_error(b"lon,lat\n1,2\n", fmt="xls"), "unknown format 'xls'", "expected 'csv' or 'geojson'")


def test_format_sniffed_without_extension():
    assert dp.load_points(b"lon,lat\n1,2\n").report.source_format == "CSV"
    assert dp.load_points(json.dumps(point(1, 2)).encode()).report.source_format == "GeoJSON"


def test_paths(tmp_path):
    p = tmp_path / "pts.csv"
    p.write_bytes(b"lon,lat\n1,2\n3,4\n")
    assert dp.load_points(str(p)).n == 2
    assert dp.load_points(p).n == 2
    g = tmp_path / "pts.geojson"
    g.write_bytes(collection(feature(point(1, 2))))
    assert dp.load_points(g).n == 1
    assert_says(load_error(str(tmp_path / "missing.csv"), filename=None), "file not found", "expected a path")
    assert_says(load_error(12345, filename=None), "expected a file path or bytes", "int")


def test_more_rows_than_max_rows():
    msg = load_error(csv_rows(GOOD), max_rows=10)
    assert_says(msg, "20 rows", "limit of 10", "upload a sample or raise the limit")
    assert dp.load_points(csv_rows(GOOD), filename="p.csv", max_rows=20).n == 20
    gj = json.dumps({"type": "MultiPoint", "coordinates": [[1, 2]] * 11}).encode()
    assert_says(load_error(gj, filename="p.geojson", max_rows=10), "11 points", "limit of 10")


# ------------------------------------------------------------------------------- GeoJSON
def test_geojson_invalid_json():
    msg = load_error(b'{"type": "FeatureCollection", "features": [', filename="p.geojson")
    assert_says(msg, "not valid json", "line 1", "column", "expected a geojson featurecollection")


def test_geojson_no_type():
    assert_says(load_error(b"[1, 2, 3]", filename="p.json"), "no geojson 'type'", "expected a featurecollection")


def test_geojson_no_features():
    msg = load_error(collection(), filename="p.geojson")
    assert_says(msg, "no features", "expected point or multipoint")
    msg = load_error(b'{"type": "FeatureCollection"}', filename="p.geojson")
    assert_says(msg, "no 'features' list", "expected")


def test_geojson_polygons_only():
    poly = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}
    msg = load_error(collection(feature(poly), feature(poly)), filename="p.geojson")
    assert_says(msg, "no point or multipoint features", "2 features that are not point/multipoint (polygon)",
                "expected point data")


def test_geojson_polygons_mixed_with_points_are_dropped_and_counted():
    poly = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}
    data = dp.load_points(collection(feature(poly), *[feature(point(i, i)) for i in range(5)]),
                          filename="p.geojson")
    assert data.n == 5
    assert data.report.dropped == {"features that are not Point/MultiPoint (Polygon)": 1}


def test_geojson_multipoint_expansion_and_user_ids():
    doc = collection(feature({"type": "MultiPoint", "coordinates": [[1, 2], [3, 4], [5, 6]]}, user_id="a"),
                     feature(point(7, 8), user_id="b"))
    data = dp.load_points(doc, filename="p.geojson")
    assert data.n == 4
    assert sorted(zip(data.x.tolist(), data.y.tolist())) == [(1, 2), (3, 4), (5, 6), (7, 8)]
    assert dict(zip(data.x.tolist(), data.user.tolist())) == {1: "a", 3: "a", 5: "a", 7: "b"}


def test_geojson_feature_id_is_not_a_user_id():
    # 'id' names the feature: reading it as a user id made every point its own "user"
    doc = collection(*[feature(point(i, i), id=f"f{i}") for i in range(5)])
    data = dp.load_points(doc, filename="p.geojson")
    assert data.n == 5 and data.user is None and "user" not in data.report.columns
    assert dp.io.USER_NAMES == ("user_id", "userid", "user", "uid")
    for name in dp.io.USER_NAMES:
        doc = collection(feature(point(1, 1), **{name: "a", "id": "f1"}), feature(point(2, 2), id="f2"))
        data = dp.load_points(doc, filename="p.geojson")
        assert data.user.tolist() == ["a", ""] and data.report.columns["user"] == name


def test_geojson_points_without_a_user_id_are_missing_and_counted():
    # absent, null, NaN or blank ids are missing (never one shared user "None"), and the report
    # says how many points have none; a file where no point has one is plain point data
    feats = [feature(point(1, 1), user_id="a"), feature(point(2, 2), uid=7),
             feature({"type": "MultiPoint", "coordinates": [[3, 3], [4, 4]]}),
             feature(point(5, 5), user_id=None), feature(point(6, 6), user=" ")]
    raw = json.dumps({"type": "FeatureCollection", "features": feats
                      + [feature(point(7, 7), userid=float("nan"))]}).encode()   # NaN: Python's json
    data = dp.load_points(raw, filename="p.geojson")
    assert data.n == 7 and data.user.tolist() == ["a", "7", "", "", "", "", ""]
    assert data.report.columns["user"] == "user_id/userid/user/uid"
    assert data.report.notes == ["5 points have no user id: user-level releases leave them out"]
    assert "5 points have no user id" in data.report.summary()
    blank = collection(feature(point(1, 1), user_id=None), feature(point(2, 2), user_id=""))
    data = dp.load_points(blank, filename="p.geojson")
    assert data.user is None and data.report.notes == [] and "user" not in data.report.columns
    data = dp.load_points(csv_rows([b"u1,1,1", b",2,2", b" ,3,3"], header=b"uid,lon,lat"),
                          filename="p.csv")
    assert data.report.notes == ["2 points have no user id: user-level releases leave them out"]


def test_geojson_single_feature_and_bare_geometry():
    assert dp.load_points(json.dumps(feature(point(1, 2))).encode(), filename="p.geojson").n == 1
    data = dp.load_points(json.dumps({"type": "MultiPoint", "coordinates": [[1, 2], [3, 4]]}).encode(),
                          filename="p.json")
    assert data.n == 2 and data.user is None


def test_geojson_out_of_range_and_non_numeric():
    msg = load_error(collection(feature(point(10, 100)), feature(point(20, 95))), filename="p.geojson")
    assert_says(msg, "latitude outside [-90, 90]", "expected")
    feats = [feature(point(i, i)) for i in range(5)] + [feature({"type": "Point", "coordinates": ["a", 8]})]
    data = dp.load_points(collection(*feats), filename="p.geojson")
    assert data.n == 5 and data.report.dropped == {"points with non-numeric coordinates": 1}
