"""`{proxy+}` matched as API Gateway matches it, for `chalice local` and Chalice's test client.

Chalice's local router (chalice.local.RouteMatcher) compares paths segment by segment, so a greedy `/{proxy+}`
route catches `/a` but not `/a/b`, and everything deeper gets the local gateway's own 403 "Missing Authentication
Token". API Gateway sends any path no other resource matches to the greedy one (app.py's dead-end route). `install`
swaps in a matcher that tries Chalice's own first and only then the greedy route, so the local stack and the tests
answer unknown paths as a deployed stage does.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from chalice import local

GREEDY = "/{proxy+}"


class GreedyRouteMatcher(local.RouteMatcher):
    """Chalice's matcher, then a fall back to `/{proxy+}` for any path below the root (as API Gateway does)."""

    def match_route(self, url: str) -> local.MatchResult:
        try:
            return super().match_route(url)
        except ValueError:
            if GREEDY not in self.route_urls:
                raise
        parsed = urlparse(url)
        path = parsed.path.rstrip("/")
        return local.MatchResult(GREEDY, {"proxy+": path.lstrip("/")}, parse_qs(parsed.query, keep_blank_values=True))


def install() -> None:
    """Every LocalGateway built from now on (chalice local, chalice.test.Client) routes with the greedy matcher."""
    local.RouteMatcher = GreedyRouteMatcher  # type: ignore[misc]
