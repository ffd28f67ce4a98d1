"""A release's rectangles as columns (`dp.rect_features`, issue 43): the GeoJSON written column
by column is, parsed, the same document the one-dict-per-feature path writes, for every kind of
rectangular release, with its stamp, provenance and whole people."""
import json

import numpy as np
import pytest

import dp
from dp.feature_files import geojson_text, release_features, stamp
from dp.provenance import provenance
from dp.rect_features import RectFeatures
from dp.whole_counts import add_people

# one release of each class with rectangles: grid, leaves, HTF (eps_final), DAWA, shifted grids
MECHANISMS = ["ug", "privtree", "htf", "dawa", "shifted_grids"]


@pytest.fixture(scope="module")
def sample():
    return dp.load_sample("small_city_5k")


def as_dicts(table: RectFeatures) -> dict:
    """The old path: one dict per feature, whole people added in place."""
    doc = table.to_dict()
    add_people(doc["features"])
    return doc


def by_dicts(doc: dict, block: dict) -> dict:
    """What the one-dict-per-feature writer wrote: each feature stamped, the block on top."""
    mark = stamp(block)
    return {**doc, "properties": {**doc["properties"], "provenance": block},
            "features": [{**f, "properties": {**f["properties"], **mark}} for f in doc["features"]]}


@pytest.mark.parametrize("mech", MECHANISMS)
def test_the_column_writer_writes_what_one_dict_per_feature_wrote(sample, mech):
    data, domain = sample
    rel = dp.release(mech, data, domain, 1.0, seed=np.random.default_rng(3))
    block = provenance(rel)
    table = release_features(rel)
    assert isinstance(table, RectFeatures) and len(table) > 1
    written = json.loads(geojson_text(table, block))
    expected = json.loads(json.dumps(by_dicts(as_dicts(rel.features()), block),
                                     default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))
    assert written == expected
    assert written["features"][0]["properties"]["mechanism"] == rel.spec.name
    # the whole people keep each collection's rounded total (per grid for shifted grids)
    people = np.array([f["properties"]["people"] for f in written["features"]])
    counts = np.array([f["properties"]["noisy_count"] for f in written["features"]])
    grids = np.array([f["properties"].get("grid", 0) for f in written["features"]])
    for g in np.unique(grids):
        assert people[grids == g].sum() == max(0, round(counts[grids == g].sum()))
        assert (people >= 0).all()


def test_numbers_keep_every_digit_and_nan_is_null():
    """orjson writes the shortest text that reads back to the same float, and NaN (not JSON) as
    null; an empty collection is a valid one."""
    values = np.array([0.1, 1e-17, 123456789.123456789, -2.5e300, np.nan])
    t = RectFeatures(np.tile([0.0, 0.0, 1.0, 1.0], (5, 1)), {"noisy_count": values, "row": np.arange(5)})
    back = [f["properties"] for f in json.loads(t.geojson_bytes())["features"]]
    assert [p["noisy_count"] for p in back[:4]] == values[:4].tolist()
    assert back[4]["noisy_count"] is None and [p["row"] for p in back] == list(range(5))
    empty = json.loads(RectFeatures(np.empty((0, 4)), {"noisy_count": np.empty(0)}).geojson_bytes({"a": 1}))
    assert empty["features"] == [] and empty["type"] == "FeatureCollection"


def test_features_without_columns_carry_the_stamp_alone():
    t = RectFeatures([[1.0, 2.0, 3.0, 4.0]], {})
    (f,) = json.loads(t.geojson_bytes({"mechanism": "ug"}))["features"]
    assert f["properties"] == {"mechanism": "ug"}
    assert f["geometry"]["coordinates"] == [[[1.0, 2.0], [3.0, 2.0], [3.0, 4.0], [1.0, 4.0], [1.0, 2.0]]]


def test_a_column_of_text_is_refused_in_words():
    with pytest.raises(TypeError, match="holds numbers"):
        RectFeatures([[0.0, 0.0, 1.0, 1.0]], {"name": np.array(["a"])}).geojson_bytes()
