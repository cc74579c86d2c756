"""The pages a shopper's links open, through the HTTP API: in the shopper's language, with the product, and a
held place on /me going on to checkout the way its reserve link does."""

from __future__ import annotations

from html.parser import HTMLParser
from posixpath import join, normpath

from chalice.test import Client

from chalicelib.shopper.optin import optin_key
from chalicelib.wiring import Services
from devstack.clocks import FixedClock
from tests.builders import add_request, joined
from tests.scenes import scene

PICTURE = "https://cdn.shop.example/chair.jpg"
PRODUCT_PAGE = "https://shop.example/products/walnut-chair"


class Links(HTMLParser):
    """Every link on a page: (its href, its text)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self.links.append((self._href, ""))

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            href, text = self.links[-1]
            self.links[-1] = (href, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._href = None


def links(body: str) -> list[tuple[str, str]]:
    parser = Links()
    parser.feed(body)
    return parser.links


def _with_pictures(services: Services, sku: str) -> None:
    services.tables.catalog.upsert(sku, {"image_url": PICTURE, "product_url": PRODUCT_PAGE})


def test_a_held_place_on_my_page_goes_on_to_checkout_through_its_reserve_link(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=1)
    token_id = s.offer(0)
    s.tap(token_id)
    me = f"/me/{services.tokens.manage(s.requests[0].contact_key)}"
    body = client.http.get(me).body.decode()
    [checkout] = [href for href, text in links(body) if text == "Go to checkout"]
    opened = client.http.get(normpath(join(me, "..", checkout)))
    assert opened.status_code == 200
    held = opened.body.decode()
    assert "One Walnut dining chair is held for you" in held and '<form id="go" method="post"' in held


def test_a_waiting_place_has_no_checkout_button(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    body = client.http.get(f"/me/{services.tokens.manage(s.requests[1].contact_key)}").body.decode()
    assert "Go to checkout" not in body and "1 person is ahead of you in line." in body


def test_my_page_speaks_the_language_of_my_latest_place(client: Client, services: Services, clock: FixedClock) -> None:
    s = scene(services, clock, units=1, people=2)
    person = s.requests[1]
    services.tables.catalog.upsert("LAMP-BRASS", {"name": "Brass lamp", "threshold": 1})
    add_request(services, "LAMP-BRASS", person.contact, joined(5, clock.now()), clock.now(), lang="de")
    me = f"/me/{services.tokens.manage(person.contact_key)}"
    body = client.http.get(me, headers={"Accept-Language": "fr"}).body.decode()
    assert '<html lang="de">' in body
    assert "Ihre Anfragen" in body and "Sie warten auf 2 Produkte." in body
    assert "1 Person ist vor Ihnen in der Warteliste." in body and "Zurück zum Shop" in body


def test_a_bad_link_speaks_the_browsers_language(client: Client, services: Services) -> None:
    body = client.http.get("/me/not.a.token", headers={"Accept-Language": "nl-BE, en;q=0.5"}).body.decode()
    assert '<html lang="nl">' in body and "Deze link is niet compleet" in body
    plain = client.http.get("/unsubscribe/nope").body.decode()
    assert '<html lang="en">' in plain and "This link is not complete" in plain


def test_the_offer_page_is_in_the_offers_language_with_the_products_picture_and_page(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=1)
    _with_pictures(services, s.sku)
    token_id = s.offer(0)
    services.tables.reservations.table.update_item(
        Key={"token_id": token_id}, UpdateExpression="SET lang = :l", ExpressionAttributeValues={":l": "es"}
    )
    response = client.http.get(f"/reserve/{services.tokens.reserve(token_id)}", headers={"Accept-Language": "de"})
    body = response.body.decode()
    assert response.status_code == 200 and '<html lang="es">' in body
    assert "Walnut dining chair vuelve a estar disponible" in body and "Resérvame uno" in body
    assert f'<img src="{PICTURE}" alt="Walnut dining chair">' in body
    assert (PRODUCT_PAGE, "Walnut dining chair") in links(body)
    assert "img-src https:" in response.headers["Content-Security-Policy"]


def test_an_unsubscribe_page_follows_the_browsers_language(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=1)
    link = f"/unsubscribe/{services.tokens.unsubscribe(s.requests[0].contact_key)}"
    body = client.http.get(link, headers={"Accept-Language": "fr-CA"}).body.decode()
    assert '<html lang="fr">' in body and "Se désabonner" in body


def test_a_link_that_names_no_offer_speaks_the_browsers_language(client: Client) -> None:
    response = client.http.get("/r/AAAAAAAAAAAAAAAAAAAAAA", headers={"Accept-Language": "fr"})
    assert response.status_code == 404
    assert '<html lang="fr">' in response.body.decode() and "Nous ne trouvons pas cette réservation" in (
        response.body.decode()
    )


def test_the_opt_in_pages_speak_the_browsers_language_and_refuse_another_sites_form(
    client: Client, services: Services, clock: FixedClock
) -> None:
    s = scene(services, clock, units=1, people=1)
    key = s.requests[0].contact_key
    services.optouts.opt_out(key, "unsubscribe")
    # An opt-in staff started for them (its link goes to their contact; read here from what it would send).
    services.tables.pending_steps.start_optin(optin_key(key), nonce="n1", now=clock.now(), ttl_s=86400, every_s=3600)
    path = "/optin/" + services.links.optin(key, "n1").rsplit("/optin/", 1)[1]
    asked = client.http.get(path, headers={"Accept-Language": "es"}).body.decode()
    assert '<html lang="es">' in asked and "Sí, enviadme mensajes otra vez" in asked
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    refused = client.http.post(path, headers={**form, "Origin": "https://elsewhere.example"}, body="")
    assert refused.status_code == 403 and "Please use the button on the page" in refused.body.decode()
    assert services.tables.optout.get(key) is not None
    done = client.http.post(path, headers={**form, "Accept-Language": "nl"}, body="")
    assert done.status_code == 200 and "Je kunt weer berichten van ons krijgen" in done.body.decode()
    assert services.tables.optout.get(key) is None
