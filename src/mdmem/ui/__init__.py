"""The local web page: browse, search, read, edit, delete and restore notes (``mdmem ui``).

May import every floor below it (store, recall, manager, ...), never ``cli``.
Starlette and uvicorn (the optional ``ui`` extra) are imported only by
``app`` and ``server``; ``markdown``, ``html``, ``model`` and ``pages`` need
nothing beyond mdmem itself.

- ``markdown``: a small, safe Markdown to HTML renderer (escapes everything).
- ``html``: ``Markup`` and templates that escape what they fill.
- ``model``: what the page shows and does, through the stores' API.
- ``pages``: the HTML of each page.
- ``app``: the ASGI application and its guard (Host, token, cookie, CSRF, CSP).
- ``server``: uvicorn on a loopback socket, a fresh token per run.
"""
