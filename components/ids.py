"""Component ids, shared by layouts, callbacks and browser tests."""

DATASET = "dataset-info"          # small public summary of the loaded dataset (never the points)
RELEASE = "release-info"          # cache key + summary of the current release
ACCOUNT_TICK = "account-tick"     # changed by anything that changes the budget account

UPLOAD = "upload"
UPLOAD_STATUS = "upload-status"
DATA_SUMMARY = "data-summary"
SAMPLE_PICK = "sample-pick"
LON_COL = "lon-column"
LAT_COL = "lat-column"
USER_COL = "user-column"
POINTS_PER_USER = "points-per-user"  # k: at most this many points per user (user-level releases)
PRIVACY_LEVEL = "privacy-level"      # says whether releases are user-level or event-level
DOMAIN_PRESET = "domain-preset"
DOMAIN_BOX = "domain-box"          # pattern: {"type": DOMAIN_BOX, "side": "west"|...}
DOMAIN_WARNING = "domain-warning"

MECHANISM = "mechanism"
MECH_DESCRIPTION = "mechanism-description"
EPSILON = "epsilon-log"
EPSILON_READOUT = "epsilon-readout"
SPLIT = "split"                    # pattern: {"type": SPLIT, "part": i}
SPLIT_READOUT = "split-readout"
PARAM = "param"                    # pattern: {"type": PARAM, "name": param name}
PARAMS_BOX = "params-box"
SEED_MODE = "seed-mode"
SEED = "seed"
RELEASE_BUTTON = "release-button"
RELEASE_STATUS = "release-status"

MAP = "map"
MAP_LAYERS = "map-layers"          # layer group filled by callbacks
MAP_LAYER_PICK = "map-layer-pick"
MAP_POINTS_TOGGLE = "map-points-toggle"
MAP_LEGEND = "map-legend"
MAP_HOVER = "map-hover"
MAP_GRID_STORE = "map-grid-store"  # per-cell values for the hover readout
EDIT = "edit-control"
DRAWN = "drawn-items"

QUERY_TABLE = "query-table"
RANDOM_N = "random-n"
RANDOM_AREA = "random-area"
RANDOM_BUTTON = "random-button"
CLEAR_BUTTON = "clear-button"

EVAL_MECHS = "eval-mechanisms"
EVAL_EPSILONS = "eval-epsilons"
EVAL_SIZES = "eval-sizes"
EVAL_NQ = "eval-n-queries"
EVAL_REPS = "eval-reps"
EVAL_RUN = "eval-run"
EVAL_CANCEL = "eval-cancel"
EVAL_POLL = "eval-poll"
EVAL_JOB = "eval-job"
EVAL_PROGRESS = "eval-progress"
EVAL_STATUS = "eval-status"
EVAL_FIG_EPS = "eval-fig-epsilon"
EVAL_FIG_SIZE = "eval-fig-size"
EVAL_TABLE = "eval-table"

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
