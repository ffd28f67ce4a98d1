"""Component ids, shared by layouts, callbacks and browser tests."""

DATASET = "dataset-info"          # small public summary of the loaded dataset (never the points)
RELEASE = "release-info"          # cache key + summary of the current release
ACCOUNT_TICK = "account-tick"     # changed by anything that changes the budget account
DOMAIN = "domain-info"            # the public domain chosen in the data panel (see controls)
SERVER_ALERT = "server-alert"     # a banner for failures no panel answers for (see alerts)
SERVER_ALERT_TEXT = "server-alert-text"
SERVER_ALERT_CLOSE = "server-alert-close"

UPLOAD = "upload"
UPLOAD_KIND = "upload-kind"        # points or regions: how an upload is read
UPLOAD_STATUS = "upload-status"
DATA_SUMMARY = "data-summary"
SAMPLE_PICK = "sample-pick"
LON_COL = "lon-column"
LAT_COL = "lat-column"
USER_COL = "user-column"
POINTS_PER_USER = "points-per-user"  # k: at most this many points per user (user-level releases)
POINTS_PER_USER_BOX = "points-per-user-box"
PRIVACY_LEVEL = "privacy-level"      # says whether releases are user-level or event-level
DOMAIN_PRESET = "domain-preset"
DOMAIN_BOX = "domain-box"          # pattern: {"type": DOMAIN_BOX, "side": "west"|...}
DOMAIN_WARNING = "domain-warning"
DOMAIN_SUGGEST = "domain-suggest"        # pattern id: the alert's choices of domain
COUNTS_BOX = "counts-box"                # the alert's button: use the box the counts were made on
SERVER_PATH = "server-path"              # a path or glob in the server's data folder
SERVER_OPEN = "server-open"
SERVER_CANCEL = "server-cancel"
SERVER_CELLS = "server-cells"            # the counting grid's longer side
SERVER_PROGRESS = "server-progress"
SERVER_PROGRESS_TEXT = "server-progress-text"   # a running count's progress in words
SERVER_OWNERS_ONLY = "server-owners-only"  # a visitor's note in place of the server files' controls
ROLE_NOTE = "role-note"                  # the header's line saying owner or visitor

MECHANISM = "mechanism"
MECH_DESCRIPTION = "mechanism-description"
MECH_RECOMMENDATION = "mechanism-recommendation"
EPSILON = "epsilon-log"
EPSILON_VALUE = "epsilon-value"          # the exact ε every reader uses; the slider is log10 of it
EPSILON_READOUT = "epsilon-readout"
SPLIT = "split"                    # pattern: {"type": SPLIT, "part": i}
SPLIT_READOUT = "split-readout"
PARAM = "param"                    # pattern: {"type": PARAM, "name": param name}
PARAMS_BOX = "params-box"
SEED_MODE = "seed-mode"
SEED = "seed"
RELEASE_BUTTON = "release-button"
RELEASE_STATUS = "release-status"
RELEASE_CANCEL = "release-cancel"
RELEASE_PROGRESS_TEXT = "release-progress-text"   # a running release's step in words
RELEASE_MADE = "release-made"         # store: a Release click's result, before the page takes it
RELEASE_REQUEST = "release-request"   # store: the request id of the latest Release click
LINK_OVER = "link-over"               # store: True once new data or a release moved the page past its link

MAP = "map"
MAP_LAYERS = "map-layers"          # layer group filled by callbacks
MAP_LAYER_PICK = "map-layer-pick"
MAP_POINTS_TOGGLE = "map-points-toggle"
MAP_LEGEND = "map-legend"
MAP_ZOOM_DOMAIN = "map-zoom-domain"
MAP_HOVER = "map-hover"
MAP_GRID_STORE = "map-grid-store"  # per-cell values for the hover readout
MAP_LEGEND_TITLE = "map-legend-title"
MAP_RASTER = "grid-raster"         # the image overlay of the chosen layer (also its CSS class)
MAP_OUTLINES = "region-outlines"
MAP_OUTLINES_PANE = "outlines-pane"
MAP_RAW_POINTS = "raw-points"
GROW_BOX = "grow-box"              # tree releases: "watch it grow" depth control
GROW_DEPTH = "grow-depth"
GROW_PLAY = "grow-play"
GROW_TIMER = "grow-timer"
GROW_DRAWN = "grow-drawn"            # the depth the map last finished drawing (Play waits for it)
SERIES_BOX = "series-box"          # series of grids: which grid is shown
SERIES_PICK = "series-pick"
EULER_BOX = "euler-box"            # consistency stages of Euler histograms
EULER_STAGE = "euler-stage"
EULER_EXTRAS = "euler-extras"
EULER_STATUS = "euler-status"
EULER_CHART = "euler-violations"
EULER_CHART_BOX = "euler-violations-box"
EULER_EDGES = "euler-edges"
EULER_VERTICES = "euler-vertices"
EDIT = "edit-control"
DRAWN = "drawn-items"

QUERY_TABLE = "query-table"
RANDOM_N = "random-n"
RANDOM_AREA = "random-area"
RANDOM_BUTTON = "random-button"
CLEAR_BUTTON = "clear-button"
QUERY_EXTRA = "extra-rects"        # store of random / typed rectangles (the EditControl owns drawn ones)
QUERY_TYPED = "typed-rect"
QUERY_TYPED_BUTTON = "typed-rect-button"
QUERY_MESSAGE = "query-message"
QUERY_WARNING = "query-warning"

# queries panel and map
QUERY_RANDOM_NOUN = "random-noun"        # "random rectangle(s) of", following the number typed
QUERY_COUNT = "query-count"              # "1 row", "2 rows"
QUERY_CSV_BUTTON = "query-csv-button"
QUERY_CSV_DOWNLOAD = "query-csv-download"

EVAL_MECHS = "eval-mechanisms"
EVAL_EPSILONS = "eval-epsilons"
EVAL_SIZES = "eval-sizes"
EVAL_NQ = "eval-n-queries"
EVAL_REPS = "eval-reps"
EVAL_RUN = "eval-run"
EVAL_CANCEL = "eval-cancel"
EVAL_PROGRESS = "eval-progress"
EVAL_STATUS = "eval-status"
EVAL_PROGRESS_TEXT = "eval-progress-text"   # a running evaluation's progress in words
EVAL_FIG_EPS = "eval-fig-epsilon"
EVAL_FIG_SIZE = "eval-fig-size"
EVAL_TABLE = "eval-table"
EVAL_RESULTS = "eval-results"

LEDGER_TABLE = "ledger-table"
LEDGER_TOTAL = "ledger-total"
LEDGER_GUARANTEE = "ledger-guarantee"
ACCOUNT_SUMMARY = "account-summary"
ACCOUNT_TABLE = "account-table"
ACCOUNT_RAISE_VALUE = "account-raise-value"
ACCOUNT_RAISE = "account-raise"
ACCOUNT_CONFIRM = "account-confirm"
ACCOUNT_MESSAGE = "account-message"

EXPORT_BUTTON = "export-button"
EXPORT_META_BUTTON = "export-meta-button"
EXPORT_DOWNLOAD = "export-download"
EXPORT_META_DOWNLOAD = "export-meta-download"
EXPORT_STATUS = "export-status"
EXPORT_PNG_BUTTON = "export-png-button"
EXPORT_SCRIPT_BUTTON = "export-script-button"
EXPORT_FILE_DOWNLOAD = "export-file-download"
PUBLISH_TITLE = "publish-title"          # the owner's title for a public page
PUBLISH_BUTTON = "publish-button"
PUBLISH_STATUS = "publish-status"        # the new page's address, or why not

IA_SIGMA = "ia-sigma"              # interactive queries with per-user budgets
IA_PLANNED = "ia-planned"
IA_STRATEGY = "ia-strategy"
IA_METHOD = "ia-method"
IA_START = "ia-start"
IA_REQUEST = "ia-request"             # store: the request id of the latest Start click
IA_STATUS = "ia-status"
IA_GUARANTEE = "ia-guarantee"
IA_FOLLOW = "ia-follow-drawn"
IA_TYPED = "ia-typed"
IA_ASK = "ia-ask"
IA_TABLE = "ia-table"
IA_HIST = "ia-hist"
IA_PLOT = "ia-plot"
IA_INFO = "ia-info"

# evaluation panel: the error floor ρ, the metric charted, the finished run's results and their CSV
EVAL_RHO = "eval-rho"
EVAL_METRIC = "eval-metric"
EVAL_SUMMARY = "eval-summary"      # the run's summary rows, ρ and design, as the page shows them
EVAL_NOTE = "eval-note"            # states ρ and how many queries held fewer than ρ points
EVAL_CSV_BUTTON = "eval-csv-button"
EVAL_CSV_DOWNLOAD = "eval-csv-download"

# Dash Pages' container (dash.page_container, components/pages.py): the address, which picks the
# page, and the page rendered into it by Dash's routing callback
PAGES_LOCATION, PAGES_CONTENT, PAGES_STORE = "_pages_location", "_pages_content", "_pages_store"
PUBLISHED_ID = "pub-id"          # the id of the published release a public page shows

# shareable settings (components/share.py)
URL = "url"                              # dcc.Location: the link the page was opened with
SHARE_NOTE = "share-note"                # whether a link's settings were applied
SHARE_BUTTON = "share-button"
SHARE_LINK = "share-link"
SHARE_COPY = "share-copy"

# compare panel: a second mechanism released beside panel 2's at the same ε, two synchronised
# maps on one colour scale, and one table of both answers per query rectangle
COMPARE_PICK = "compare-pick"
COMPARE_BUTTON = "compare-button"
COMPARE_REQUEST = "compare-request"   # store: the request id of the latest comparison click
COMPARE_COST = "compare-cost"            # what the comparison release spends, or why none is offered
COMPARE_STATUS = "compare-status"
COMPARE_RELEASE = "compare-release"      # store: the comparison's key and label, and the release it sits beside
COMPARE_MESSAGE = "compare-message"      # why nothing is shown (no release, new data, no comparison yet)
COMPARE_RESULTS = "compare-results"      # maps, summary and table; hidden while there is nothing to show
COMPARE_MAPS = "compare-maps"
COMPARE_MAP_A = "compare-map-a"
COMPARE_MAP_B = "compare-map-b"
COMPARE_RECTS_A = "compare-rects-a"        # the query rectangles drawn on each comparison map
COMPARE_RECTS_B = "compare-rects-b"
COMPARE_RASTER = "compare-raster"        # the image overlays' CSS class
COMPARE_SCALE = "compare-scale"          # the shared colour scale's unit
COMPARE_SUMMARY = "compare-summary"
COMPARE_TABLE = "compare-table"

# guided demo: a short tour for non-specialists through the existing panels
TOUR_OPEN = "tour-open"            # the header's "Guided demo" button
TOUR_CARD = "tour-card"
TOUR_STEP = "tour-step"            # index of the step shown; None while the tour is closed
TOUR_TARGETS = "tour-targets"      # per step, the id of an element in the panel it talks about
TOUR_MARGINS = "tour-margins"      # noise margin of the middle box, per ε released during the tour
TOUR_TITLE = "tour-title"
TOUR_COUNTER = "tour-counter"
TOUR_BODY = "tour-body"
TOUR_CHART = "tour-chart"
TOUR_BACK = "tour-back"
TOUR_NEXT = "tour-next"
TOUR_END = "tour-end"

# plan before spending (components/plan_panel.py)
PLAN_BOX = "plan-box"
PLAN_AREA = "plan-area"
PLAN_TARGET = "plan-target"
PLAN_LEVEL = "plan-level"
PLAN_POINTS = "plan-points"
PLAN_EXACT = "plan-exact-values"        # "my points may sit on exact values" (ticked): the values and strips twins
PLAN_RUN = "plan-run"
PLAN_CANCEL = "plan-cancel"
PLAN_PROGRESS = "plan-progress"
PLAN_STATUS = "plan-status"
PLAN_PROGRESS_TEXT = "plan-progress-text"   # a running plan's progress in words
PLAN_RESULT = "plan-result"
PLAN_PREVIEW = "plan-preview"
PLAN_MADE = "plan-made"                # the request, box and bound per user of the plan shown (for its previews)
PLAN_USE = "plan-use"              # the pattern id type of a plan row's Use button

SHAPES_KIND = "shapes-kind"              # H3 hexagons or uploaded districts
SHAPES_H3_RES = "shapes-h3-resolution"
SHAPES_PUBLIC = "shapes-public"          # the declaration that uploaded districts are public
SHAPES_UPLOAD = "shapes-upload"
SHAPES_FILE = "shapes-file"              # names the district file loaded
SHAPES_SHOW = "shapes-show"
SHAPES_HIDE = "shapes-hide"
SHAPES_DL_GEOJSON = "shapes-download-geojson"
SHAPES_DL_PARQUET = "shapes-download-parquet"
SHAPES_DOWNLOAD = "shapes-download"
SHAPES_TICK = "shapes-tick"              # changed by a district upload: redraw
SHAPES_STATUS = "shapes-status"
SHAPES_LAYER = "shapes-layer"            # the map's layer group holding the choropleth
SHAPES_GEOJSON_LAYER = "shapes-geojson"
SHAPES_LEGEND = "shapes-legend"
