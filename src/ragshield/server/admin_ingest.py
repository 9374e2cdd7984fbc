"""``POST /v1/admin/index/add`` and ``/v1/admin/quarantine``: ingestion on a live service.

Example::

    curl -H "Authorization: Bearer $ADMIN_KEY" -d '{"documents": [{"id": "d1",
         "text": "..."}]}' http://127.0.0.1:8000/v1/admin/index/add

Why: a running service is where documents arrive; they get the same screening as
``ragshield add`` (:func:`ragshield.ingest.add_documents`: provenance, quarantine,
crash-safe write), then the service swaps in the index it wrote, so the accepted documents
are searchable by the next request and the flagged ones never are. Admin scope only; one
ingestion at a time (a lock), while questions keep being answered from the old index.
"""

import threading
from dataclasses import replace
from typing import Annotated, Any

from fastapi import Depends, FastAPI
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ragshield.server.auth import ApiKey
from ragshield.server.schemas import UnicodeBody
from ragshield.types import Passage


class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=255)
    text: str = Field(min_length=1)
    title: str = ""


class AddRequest(UnicodeBody):
    model_config = ConfigDict(extra="forbid")
    documents: list[DocumentIn] = Field(min_length=1)
    source: str | None = Field(default=None, max_length=500)
    screen: str | None = Field(default=None, description="Defense chain [ragdefender,ecosaferag]")


class IdsRequest(UnicodeBody):
    model_config = ConfigDict(extra="forbid")
    ids: list[str] = Field(min_length=1)


def _swap(service: Any) -> None:
    """Open the index the ingestion wrote and serve it from the next request on."""
    from ragshield.store.persist import load_store

    store = load_store(service.config.index)
    with service._lock:
        service.store = store
        service.parts = replace(service.parts, store=store)
        service._pipelines.clear()


def mount(app: FastAPI, service: Any, requires: Any) -> None:
    from ragshield import ingest

    lock = threading.Lock()
    Admin = Annotated[ApiKey, Depends(requires("admin"))]

    def _add(req: AddRequest, key_id: str) -> dict[str, Any]:
        passages = [Passage(d.id, d.text, d.title) for d in req.documents]
        with lock:
            report = ingest.add_documents(
                service.config.index,
                passages,
                source=req.source or f"api:{key_id}",
                screen=req.screen or ingest.DEFAULT_SCREEN,
                encoder=service.encoder,
            )
            _swap(service)
        return report.to_dict()

    @app.post("/v1/admin/index/add", tags=["admin"])
    async def admin_add(body: AddRequest, key: Admin) -> dict[str, Any]:
        """Screen and append documents; flagged ones go to the quarantine."""
        return await run_in_threadpool(_add, body, key.id)

    @app.get("/v1/admin/quarantine", tags=["admin"])
    def admin_quarantine(_: Admin) -> list[dict[str, Any]]:
        return [q.to_dict() for q in ingest.quarantine_list(service.config.index)]

    def _release(ids: list[str]) -> dict[str, Any]:
        with lock:
            done = ingest.release(service.config.index, ids)
            _swap(service)
        return {"released": done}

    @app.post("/v1/admin/quarantine/release", tags=["admin"])
    async def admin_release(body: IdsRequest, _: Admin) -> dict[str, Any]:
        return await run_in_threadpool(_release, body.ids)

    def _delete(ids: list[str]) -> dict[str, Any]:
        with lock:
            return {"deleted": ingest.delete(service.config.index, ids)}

    @app.post("/v1/admin/quarantine/delete", tags=["admin"])
    async def admin_delete(body: IdsRequest, _: Admin) -> dict[str, Any]:
        return await run_in_threadpool(_delete, body.ids)
