"""What every resource's requests share: path segments, query values,
and lists read page by page.
"""

import urllib.parse

from dtn_migrate.client import exceptions

#: The API's largest page.
MAX_PAGE = 1000


def quote(value):
    """``value`` as one path segment."""
    return urllib.parse.quote(str(value), safe="")


def params(**values):
    """Query parameters: None left out, booleans as ``true``/``false``,
    collections as lists.
    """
    out = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple, set)):
            value = list(value)
        out[key] = value
    return out


def next_marker(body):
    """The marker of the "next" link of a list answer, or None."""
    for link in body.get("links") or ():
        if isinstance(link, dict) and link.get("rel") == "next":
            query = urllib.parse.urlsplit(link.get("href") or "").query
            markers = urllib.parse.parse_qs(query).get("marker")
            if markers:
                return markers[-1]
    return None


def list_all(client, path, key, query, limit=None, page_size=None):
    """Every item of a paged list answer (``key``), following the "next"
    links until ``limit`` items are read (all when None).

    Pages hold ``page_size`` items (at most MAX_PAGE).  Unless told, they
    hold MAX_PAGE, and an API whose ``[api] max_limit`` is smaller, which
    refuses that (400), is then asked for pages of its own size.
    """
    query = dict(query)
    marker = query.pop("marker", None)
    page = min(page_size or MAX_PAGE, MAX_PAGE)
    chosen = page_size is None
    found = []
    seen = set()
    while True:
        ask = dict(query)
        if page is not None:
            ask["limit"] = page if limit is None \
                else min(page, limit - len(found))
        if marker is not None:
            ask["marker"] = marker
        try:
            body = client.get(path, params=ask) or {}
        except exceptions.HttpBadRequest:
            if not chosen or page is None:
                raise
            page = None
            continue
        items = body.get(key) or []
        if limit is not None:
            items = items[:limit - len(found)]
        found.extend(items)
        marker = next_marker(body)
        if not items or marker is None or marker in seen or \
                (limit is not None and len(found) >= limit):
            return found
        seen.add(marker)
