"""Plain-language help for each panel, written for someone who has never heard of DP."""
from dash import html

TEXTS = {
    "data": [
        "Your data stays on this server for your browser session only; other visitors cannot see it, "
        "and the page never receives the raw points, only a small sample for the owner's map layer.",
        "The domain is the public box everything is counted in. Choose it from what anybody could "
        "know (a city's boundary), not from the data: a box fitted to the data reveals where the "
        "most extreme people are.",
        "The domain is your declaration of where the data may lie. When most of your data falls "
        "outside it, nothing is released: the panel offers public boxes that hold the points, a "
        "typed box, or fitting the box to the data (which leaks its edges).",
        "Data too big to upload can be opened from the server's data folder: it is counted on a "
        "fine grid there, and the counts are released like points by every mechanism that only "
        "needs counts.",
    ],
    "mechanism": [
        "A mechanism turns exact counts into counts with carefully calibrated random noise, so that "
        "no single person's presence changes what is published by much.",
        "The list starts on the recommended mechanism (marked ★): the one with the lowest error "
        "in most of our measurements on real city data. The others are there to compare.",
        "Epsilon (ε) is the privacy budget: smaller means more noise and stronger privacy. Values "
        "between 0.1 and 1 are common. Some mechanisms spend part of ε on choosing their own "
        "settings (for example the grid size) and the rest on the counts; the sliders show the split.",
        "Not sure which ε? Open 'Plan ε before spending': say how accurate rectangles of a given size "
        "must be, and see each mechanism's ε for that, found on a synthetic city in the same box. It "
        "reads none of your data and spends nothing; 'Use' fills in the mechanism and ε.",
        "Fresh randomness (the default) draws the noise from the operating system, so nobody can "
        "reproduce it. A fixed seed repeats a demo exactly, but anyone who knows or guesses the "
        "seed can regenerate the noise and subtract it: such a release is labelled NOT private. "
        "Each new release on the same data spends budget again.",
        "Loading data for the first time runs one release with the current settings, so the map is "
        "never empty; it is charged to the dataset's budget like any other. Reloading the page or "
        "loading the same file again shows your last release instead, at no new cost.",
    ],
    "map": [
        "Each coloured cell is a published count with noise. Darker means more people. Cells can "
        "come out negative after noise; the map shows them as empty, the numbers keep them.",
        "The owner-only layers show the true counts and the error (published minus true) so you can "
        "see what privacy costs where. They are never part of the export.",
        "Hover over a cell to read its published count and, for the owner, the true count.",
    ],
    "shapes": [
        "Counts per district or per hexagon are answered from the release shown, for free: each "
        "released region gives its count to the shapes it overlaps, in proportion to the area "
        "they share. Nothing new is drawn from the data and nothing is charged.",
        "H3 hexagons are laid over the public box alone. Districts come from a file you upload "
        "(GeoJSON or GeoParquet, any coordinate system): tick that they are public first, such as "
        "published boundaries. Shapes drawn around the data, or over a box fitted to the data, "
        "would give away where the data is, so a fitted box is refused.",
        "The map colours each shape by its count per km², so large and small districts compare. "
        "Hover a shape for its count, the 95% interval of the noise in it, and how much of it lies "
        "in released regions wholly inside it (the rest is spread by area, which assumes people "
        "are spread evenly inside each region).",
        "The downloads hold every shape with its id (or H3 index), count, interval and resolved "
        "share, and the release's provenance: GeoJSON, or GeoParquet for GeoPandas and GIS tools.",
    ],
    "queries": [
        "Draw a rectangle with the ▭ tool on the map, or type its corners: the table compares the "
        "published answer with the true one, and the map labels each rectangle with its row (Q for "
        "drawn, R for typed or random). A rectangle partly outside the public box is clipped to it "
        "(the row says so); one wholly outside is refused, since nothing is counted there.",
        "Beside each answer, 'True count lies in' gives a range that holds the true count 95% of "
        "the time whatever the data: it adds the noise of the counts to the error of spreading "
        "people evenly inside the cells a rectangle cuts, so it is the number to read as accuracy. "
        "It is wide where the rectangle cuts big cells or the noise is large.",
        "Answering rectangles costs no extra privacy: it only reads the published counts. The CSV "
        "download holds the published answers and ranges, and a 95% interval of the noise alone "
        "(labelled so: it leaves out the spreading error), never the true counts.",
    ],
    "compare": [
        "Two mechanisms released at the same ε on the same data, side by side: A is the release "
        "made in step 3 (Release), B the mechanism you pick here, with its default settings and the same "
        "kind of randomness. Both maps use one colour scale, so the same colour means the same "
        "density on both; moving or zooming one map moves the other.",
        "Releasing for comparison is a second release of the same people: it spends another ε "
        "from the dataset's budget, exactly like pressing Release again, because two noisy "
        "releases together reveal more than either alone. The budget counts both even if you "
        "publish only one.",
        "The table answers every rectangle of step 4 (Explore) from both releases, next to the true count "
        "(owner only, not private) and each answer's error; 'Closer' says which answer was nearer "
        "the truth, and the line above the table counts the wins and gives each one's typical "
        "(median) error. A few rectangles and one draw of noise can mislead: add random "
        "rectangles in step 4 (Explore) for a fairer picture, and use step 5 (Evaluate and compare) for averages "
        "over many draws.",
    ],
    "evaluation": [
        "Runs each mechanism many times on your data with random rectangles and plots the typical "
        "(median) error. By default this is the bounded relative error: how far the published answer "
        "is from the true count, divided by that count, so 0.1 means off by about 10%. A rectangle "
        "with fewer than ρ people (20 unless you change it) is divided by ρ instead: an empty "
        "rectangle still gets a sensible error rather than an infinite one. 'Absolute error' shows "
        "how many people the answers are off by. The shaded band spans the middle half of the runs.",
        "The table gives both errors; a cell without a number says why. 'Download CSV' saves the "
        "table, and the camera icon above a chart saves the chart as a picture.",
        "This analysis reads the true data and is for the data owner only; it is not a release. "
        "It is not charged to the dataset's budget because it publishes nothing: it shows you, who "
        "already hold the data, errors against your own true counts. Do not share its charts.",
    ],
    "interactive": [
        "A different way to publish: nobody releases a map. Each person keeps their own privacy "
        "budget on their phone and answers each rectangle you ask with a noisy signal of whether "
        "they are inside. Points clearly inside or outside stop answering early, so they save "
        "budget for later questions.",
        "σ sets how much each person is willing to reveal in total: the smaller σ, the more noise "
        "and the stronger the protection. The guarantee is stated by distance: locations 10 m "
        "apart are almost impossible to tell apart, 1 km apart much less so.",
        "A person whose budget would run out stops answering for good ('halted'). The table "
        "compares each answer with the truth, with a one-shot baseline that never saves budget "
        "and with a single noisy release of every point at the whole budget (owner-only "
        "simulations, not part of what an analyst sees; they publish nothing and are not charged).",
        "Starting a session charges the dataset's budget: each user's whole-session budget, at the "
        "distance stated below the σ box, converted to ε for the running total.",
    ],
    "ledger": [
        "Each dataset has a total privacy budget (ε = 10 unless you raise it). Every release and "
        "every interactive session is charged to it, and a release that would go past the total is "
        "refused. Publishing twice with fresh noise costs twice: two noisy copies of the same "
        "counts can be averaged, so together they reveal more than either alone.",
        "The account lives on the server, tied to this browser and to the file's contents: "
        "reloading the page, opening a second tab or uploading the same file again continues the "
        "same account. Data opened from the server's folder has one account on the server, "
        "whichever owner's browser spends it; visitors can neither open nor spend it. Raising the "
        "total needs a confirmation, because it weakens the promise to everyone in the data; it "
        "can never be lowered.",
        "The step table lists what the current release looked at and the part of ε each step "
        "spent; its total equals the ε you chose.",
    ],
    "tour": [
        "A short walk through the page for someone new to privacy: the data, what is published, "
        "what privacy costs in accuracy, what an attacker can learn, and the budget. Back and "
        "Next move between the steps; End tour closes it at any point. The panel a step talks "
        "about is outlined.",
        "Two steps change the page the way you would: they type ε into step 3 (Release) and press Release. "
        "Each of those releases spends ε from the dataset's budget like any other, and the step "
        "before says so. Nothing else in the tour is charged.",
        "The chart shows how far the noise can move the published count of a box in the middle "
        "of the map, as each release states it; it never uses the true counts.",
    ],
    "export": [
        "Downloads the published grid (GeoJSON) and a description of how it was made. It contains "
        "only noisy counts and public settings, never true counts or the raw data.",
        "Both files carry a provenance block: software version, time of the release, mechanism, "
        "parameters, ε and split, unit of privacy, the ledger, and the ε this dataset has spent so "
        "far. Map (PNG) saves the map's private layer with its colour bar. Repeat script (Python) "
        "saves a short script that makes the same kind of release from your own copy of the file "
        "with the dp package; each run draws fresh noise and spends ε again.",
    ],
}


def help_box(panel: str) -> html.Details:
    return html.Details(className="help", children=[
        html.Summary("What am I looking at?"),
        *[html.P(t) for t in TEXTS[panel]],
    ])
