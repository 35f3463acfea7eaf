"""Load HTML pages in headless Chromium and fail on what a reader would see broken.

    python3 tools/check_pages.py site userdp-demo/report.html

Each argument is a directory (a built site: every ``*.html`` in it is loaded, which covers every page in
its navigation) or a single HTML file. Each is served over http://127.0.0.1 by a local
``http.server`` on a free port, and every page is loaded in Debian's Chromium through Playwright
(``--chromium PATH``, default ``/usr/bin/chromium``; Playwright's own browser download is never used).

A page fails on:

* a response with an HTTP error (404 …) for the page or anything it loads, or a request that fails;
* a request to any other host than the local server (the pages must work offline; such requests are
  blocked and reported);
* a console error or an uncaught JavaScript exception;
* an image that does not display (``naturalWidth`` 0 after loading);
* an internal link to a page that does not exist, or to an ``#anchor`` that is not on its target page.

Prints one line per problem and a summary; exits 1 if there is any problem, 0 otherwise.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import socketserver
import sys
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urldefrag

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Runs in the page: make lazy images load, wait for every image, then report the ones that show nothing,
# every link and every id on the page.
INSPECT = """
async () => {
  const imgs = Array.from(document.images);
  for (const img of imgs) { img.loading = "eager"; }
  await Promise.all(imgs.map(img => img.complete ? null : new Promise(r => {
    img.addEventListener("load", r, {once: true});
    img.addEventListener("error", r, {once: true});
    setTimeout(r, 10000);
  })));
  const broken = imgs.filter(img => !(img.complete && img.naturalWidth > 0))
                     .map(img => (img.getAttribute("src") || "").slice(0, 120));
  const links = Array.from(document.querySelectorAll("a[href]")).map(a => a.href);
  const ids = Array.from(document.querySelectorAll("[id]")).map(e => e.id)
      .concat(Array.from(document.querySelectorAll("a[name]")).map(e => e.name));
  return {broken, links, ids};
}
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 -- the base class's name
        pass


class _Server(socketserver.ThreadingTCPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a page closed while loading: not a problem
            super().handle_error(request, client_address)


@contextmanager
def serve(directory: Path):
    """Serve ``directory`` on 127.0.0.1 at a free port; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    with _Server(("127.0.0.1", 0), handler) as httpd:
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}/"
        finally:
            httpd.shutdown()


class Checker:
    def __init__(self, browser, base: str, label: str):
        self.browser, self.base, self.label = browser, base, label
        self.problems: list[str] = []
        self.ids: dict[str, set[str]] = {}
        self.links: list[tuple[str, str]] = []  # (from page, absolute link)
        self.pages = 0

    def problem(self, page: str, what: str) -> None:
        self.problems.append(f"{self.label}: {page[len(self.base) - 1 :] or '/'}: {what}")

    def local(self, url: str) -> bool:
        return url.startswith(self.base)

    def load(self, url: str) -> None:
        self.pages += 1
        context = self.browser.new_context()
        page = context.new_page()

        def route(r):
            if self.local(r.request.url) or r.request.url.startswith(("data:", "blob:", "about:")):
                r.continue_()
            else:
                self.problem(url, f"request to another host (blocked; pages must work offline): {r.request.url}")
                r.abort()

        page.route("**/*", route)
        page.on("console", lambda m: m.type == "error" and self.problem(url, f"console error: {m.text}"))
        page.on("pageerror", lambda e: self.problem(url, f"uncaught exception: {e}"))
        page.on(
            "response",
            lambda r: r.status >= 400 and self.problem(url, f"HTTP {r.status} for {r.url}"),
        )
        page.on(
            "requestfailed",
            lambda r: self.local(r.url) and self.problem(url, f"request failed ({r.failure}): {r.url}"),
        )
        try:
            response = page.goto(url, wait_until="load", timeout=60_000)
            if response is None or response.status >= 400:
                self.problem(url, f"the page itself: HTTP {response.status if response else '?'}")
            else:
                found = page.evaluate(INSPECT)
                for src in found["broken"]:
                    self.problem(url, f"image does not display: {src}")
                self.ids[_page_key(urldefrag(url)[0])] = set(found["ids"])
                self.links += [(url, link) for link in found["links"]]
        finally:
            context.close()

    def check_links(self) -> None:
        """Every internal link found on the loaded pages: its target answers, and its anchor exists there."""
        statuses: dict[str, int] = {}
        for page, link in self.links:
            if not self.local(link):
                continue
            target, fragment = urldefrag(link)
            target = _page_key(target)
            if target not in statuses:
                statuses[target] = self.status(target)
            if statuses[target] >= 400:
                self.problem(page, f"broken link (HTTP {statuses[target]}): {link}")
            elif fragment and target in self.ids and unquote(fragment) not in self.ids[target]:
                self.problem(page, f"broken anchor: {link}")

    def status(self, url: str) -> int:
        try:
            with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 -- the local server only
                return r.status
        except urllib.error.HTTPError as e:
            return e.code


def _page_key(url: str) -> str:
    return url[: -len("index.html")] if url.endswith("/index.html") else url


def check(browser, target: Path) -> Checker:
    """Load every page of a site directory (or the one HTML file), then check every internal link."""
    if target.is_dir():
        root, pages = target, sorted(p.relative_to(target).as_posix() for p in target.rglob("*.html"))
    else:
        root, pages = target.parent, [target.name]
    with serve(root) as base:
        checker = Checker(browser, base, str(target))
        for p in pages:
            checker.load(_page_key(base + p))
        checker.check_links()
    return checker


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="+", type=Path, help="a built site (directory) or an HTML file")
    ap.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium executable")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    problems, pages = [], 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        try:
            for target in args.targets:
                if not target.exists():
                    problems.append(f"{target}: does not exist")
                    continue
                checker = check(browser, target)
                problems += checker.problems
                pages += checker.pages
                print(f"{target}: {checker.pages} page(s) loaded, {len(checker.problems)} problem(s)")
        finally:
            browser.close()
    for p in sorted(set(problems)):
        print(f"PROBLEM {p}")
    print(f"check_pages: {pages} pages, {len(set(problems))} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
