"""``mdmem ui``: the local web page, served until Ctrl-C."""

from __future__ import annotations

from typing import Annotated

import typer

from mdmem.cli._base import app, options_of


@app.command()
def ui(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option(
            help="The address to listen on: a loopback one unless --allow-remote "
            "[default: a loopback address of its own, 127.x.y.z]."
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="The port; 0 picks a free one.")] = 0,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the address, do not open a browser.")
    ] = False,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote", help="Allow a --host that is not a loopback address (plain HTTP)."
        ),
    ] = False,
) -> None:
    """Browse, search, edit, delete and restore notes in a local web page.

    Serves the stores of the workspace on a loopback address of its own
    (127.x.y.z, so its cookie reaches no other local server) and prints the
    address, which carries a one-time token: the first browser to open it gets
    the page, then it is void (a fresh one is printed for another browser).
    Opens the page in the browser unless --no-browser, with a token of its
    own that is void once used or after two minutes. Ctrl-C stops the server.
    Needs mdmem's ui extra (or the mcp extra, which brings the same two packages).

    Example: mdmem ui --no-browser --port 8765
    """
    try:
        from mdmem.ui.model import Stores
        from mdmem.ui.server import Server
    except ImportError as exc:
        from mdmem._install import extra_hint

        typer.echo(
            f"mdmem: error: mdmem ui needs the ui extra ({exc.name} is missing): "
            + extra_hint("ui"),
            err=True,
        )
        raise typer.Exit(1) from None

    workspace, project, user = options_of(ctx).stores()

    def fresh(url: str) -> None:
        typer.echo(f"mdmem: that address is used up; for another browser: {url}", err=True)

    server = Server(
        Stores(workspace, project, user),
        host=host,
        port=port,
        allow_remote=allow_remote,
        on_token=fresh,
    )
    if server.warning:
        typer.echo(f"mdmem: warning: {server.warning}", err=True)
    typer.echo(server.url)
    typer.echo("mdmem: serving the notes of this workspace; Ctrl-C stops", err=True)
    if not no_browser:
        import webbrowser

        # Not the printed address: the opener's command line is visible to every
        # local user, so it gets a token of its own, void once used or soon anyway.
        webbrowser.open(server.opener_url())
    server.run()
    typer.echo("mdmem: stopped", err=True)
