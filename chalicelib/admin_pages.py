"""The shop owner's dashboard: its one HTML page and the scripts and style it loads (docs/ADMIN.md, "Pages").

The page holds no data: its script signs in against /admin/api/session, keeps the id token in sessionStorage and
fetches everything else from /admin/api/* with it. Every URL in it is relative, so it works under a stage prefix.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static" / "admin"

# The only files /admin/static/{name} serves, with their types: a name is looked up here, never joined to a path,
# so "../app.py" or "%2e%2e" can reach nothing.
STATIC_FILES: dict[str, str] = {
    "admin.js": "text/javascript; charset=utf-8",
    "charts.js": "text/javascript; charset=utf-8",
    "admin.css": "text/css; charset=utf-8",
}

# Scripts, styles and calls from this origin only; no inline script or style, no images (the charts are inline SVG),
# no plugins, no framing, and forms that cannot submit anywhere (the script sends them; without it a password must
# not land in a URL).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)

PAGE_HEADERS: dict[str, str] = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "X-Robots-Tag": "noindex",
}

# Static files change only with a deployment; a short cache keeps a new deployment's page and script in step.
STATIC_HEADERS: dict[str, str] = {
    "Cache-Control": "public, max-age=300",
    "X-Content-Type-Options": "nosniff",
}

TABS = (
    ("demand", "Demand"),
    ("restocks", "Restocks"),
    ("waiting", "Waiting list"),
    ("support", "Support"),
    ("operations", "Operations"),
)


def _tabs() -> str:
    buttons = "".join(
        f'<button type="button" role="tab" id="tab-{key}" aria-controls="panel-{key}" aria-selected="false" '
        f'tabindex="-1" data-tab="{key}">{label}</button>'
        for key, label in TABS
    )
    panels = "".join(
        f'<section class="panel" role="tabpanel" id="panel-{key}" aria-labelledby="tab-{key}" tabindex="0" hidden>'
        f'<h2 class="visually-hidden">{label}</h2><div class="panel-body" id="body-{key}"></div></section>'
        for key, label in TABS
    )
    return f'<div class="tabs" role="tablist" aria-label="Dashboard sections">{buttons}</div>{panels}'


PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Back-in-stock dashboard</title>
<link rel="stylesheet" href="admin/static/admin.css">
<script type="module" src="admin/static/admin.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <p class="brand">Back-in-stock dashboard</p>
  <div class="who" id="who" hidden>
    <span id="who-email"></span> <span class="tag" id="who-role"></span>
    <button type="button" id="sign-out">Sign out</button>
  </div>
</header>
<div class="alert" id="alert" role="alert" hidden></div>
<p class="status" id="status" role="status" aria-live="polite"></p>
<main id="main">
<noscript><p>This dashboard needs JavaScript.</p></noscript>
<section class="sign-in" id="sign-in" aria-labelledby="sign-in-heading" hidden>
  <h1 id="sign-in-heading">Sign in</h1>
  <form id="sign-in-form" method="post" action="#">
    <label for="sign-in-email">Email</label>
    <input id="sign-in-email" name="email" type="email" autocomplete="username" required>
    <label for="sign-in-password">Password</label>
    <input id="sign-in-password" name="password" type="password" autocomplete="current-password" required>
    <button type="submit">Sign in</button>
  </form>
  <form id="challenge-form" method="post" action="#" hidden>
    <p id="challenge-text"></p>
    <p id="challenge-key" hidden>Key: <code id="challenge-secret"></code></p>
    <label for="challenge-answer" id="challenge-label">Answer</label>
    <input id="challenge-answer" name="answer" required>
    <button type="submit">Continue</button>
  </form>
</section>
<section class="dashboard" id="dashboard" aria-labelledby="dashboard-heading" hidden>
  <h1 id="dashboard-heading" class="visually-hidden">Dashboard</h1>
  <form class="period" id="period" method="post" action="#" aria-label="Period">
    <div><label for="period-from">From</label><input id="period-from" name="from" type="date" required></div>
    <div><label for="period-to">To</label><input id="period-to" name="to" type="date" required></div>
    <button type="submit">Show period</button>
  </form>
  <p class="hint" id="time-zone"></p>
  {_tabs()}
</section>
</main>
</body>
</html>
"""


def page() -> str:
    """The dashboard's HTML shell; serve it with PAGE_HEADERS."""
    return PAGE


@lru_cache(maxsize=len(STATIC_FILES))
def _read(name: str) -> bytes:
    return (STATIC_DIR / name).read_bytes()


def static_file(name: str) -> tuple[bytes, str] | None:
    """An allow-listed file of chalicelib/static/admin/ and its Content-Type; None for any other name."""
    content_type = STATIC_FILES.get(name)
    if content_type is None:
        return None
    return _read(name), content_type
