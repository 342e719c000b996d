"""The local web page: browse, search, read, edit, delete and restore notes (``mdmem ui``).

May import every floor below it (store, recall, manager, ...), never ``cli``.
Starlette and uvicorn (the optional ``ui`` extra) are imported only by
``guard``, ``app`` and ``server``; the other modules need nothing beyond mdmem.

- ``markdown``: a small, safe Markdown to HTML renderer (escapes everything).
- ``html``: ``Markup`` and templates that escape what they fill.
- ``model``: what the page shows and does, through the stores' API.
- ``features``: history, review and more markers, where this mdmem has them.
- ``layout``: the frame of every page and the pieces pages share.
- ``pages``: the HTML of each page.
- ``guard``: what every request passes first (Host, token and cookie, origin, headers).
- ``app``: the ASGI application: routes, forms and their CSRF token.
- ``server``: uvicorn on a loopback socket, a fresh token per run.
"""
