"""Every server-side callback of the app is a module-level function of its panel (issue 42), so
a test imports and calls it without Dash; Dash's own (the pages' router, the cancel callbacks
of background callbacks) and the browser-side ones are not the app's."""
from __future__ import annotations

import sys

from app import create_app


def test_every_callback_is_a_function_a_test_can_import():
    app = create_app({"tiles_url": "http://127.0.0.1:9/{z}/{x}/{y}.png"})
    ours = []
    for output, cb in app.callback_map.items():
        fn = cb.get("callback")
        if fn is None:                         # a clientside callback: it runs in the browser
            continue
        fn = getattr(fn, "__wrapped__", fn)
        if fn.__module__.startswith("dash."):  # Dash's router and cancel callbacks
            continue
        assert "<locals>" not in fn.__qualname__, f"{output}: {fn.__qualname__} is a closure"
        assert getattr(sys.modules[fn.__module__], fn.__name__) is fn, output
        ours.append(fn)
    assert len(ours) >= 60 and len(set(ours)) == len(ours)     # each registered once
