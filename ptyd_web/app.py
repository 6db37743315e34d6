"""The dashboard's routes: the page and its static files (shipped in the package: no build step, no CDN), the
state and its event stream (server-sent events), and the recordings with their rendered frames."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ptyd_web.frames import NotARecording, render_frames
from ptyd_web.hub import Hub

STATIC = Path(__file__).parent / "static"
KEEPALIVE_S = 15.0  # a comment line this often keeps proxies and the browser from closing an idle stream
NO_STORE = {"cache-control": "no-store"}


def build(hub: Hub, emulator: str = "auto", on_stop: Callable[[], None] = lambda: None) -> Starlette:
    """The app; ``on_stop`` runs as it shuts down (uvicorn re-raises SIGTERM after serving: later is too late)."""

    async def index(_: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=NO_STORE)

    async def state(_: Request) -> Response:
        return JSONResponse(hub.state(), headers=NO_STORE)

    async def events(request: Request) -> Response:
        page = hub.join()

        async def stream() -> AsyncIterator[str]:
            try:
                while True:
                    try:
                        message = await asyncio.wait_for(page.queue.get(), KEEPALIVE_S)
                    except TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    if message is None or await request.is_disconnected():
                        return
                    kind, data = message
                    yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
            finally:
                hub.leave(page)

        headers = {**NO_STORE, "x-accel-buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def recordings(_: Request) -> Response:
        return JSONResponse(await hub.recordings(), headers=NO_STORE)

    async def frames(request: Request) -> Response:
        # Only a file the daemon lists as a recording: the page cannot name any other path.
        wanted = request.query_params.get("path", "")
        listed = {r["path"] for r in (await hub.recordings())["recordings"]}
        if wanted not in listed:
            return JSONResponse({"error": "no such recording"}, status_code=404)
        try:
            rendered = await asyncio.to_thread(render_frames, Path(wanted), emulator)
        except (OSError, NotARecording) as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return JSONResponse(rendered, headers=NO_STORE)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[dict[str, Any]]:
        task = asyncio.create_task(hub.run(), name="ptyd web hub")
        try:
            yield {}
        finally:
            for page in list(hub.pages):
                page.put(None)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            on_stop()

    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/state", state),
            Route("/api/events", events),
            Route("/api/recordings", recordings),
            Route("/api/frames", frames),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        lifespan=lifespan,
    )
