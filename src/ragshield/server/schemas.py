"""Request and response bodies of the HTTP API (they are also its OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ragshield.errors import lone_surrogate


def _text(value: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"the {what} is empty: pass a non-blank {what}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"the {what} is not valid Unicode (it holds a lone surrogate)") from None
    return value


def _non_blank(what: str) -> AfterValidator:
    """The check of a free-text field (``what`` names it in the error), declared on the field
    with ``Annotated`` instead of a validator method per model."""
    return AfterValidator(lambda value: _text(value, what))


def first_bad_string(data: object) -> str | None:
    """Where in ``data`` (a parsed JSON body) the first string with a lone surrogate is,
    as a dotted path, or None. Walks nested lists and objects (keys too) without recursion,
    so every endpoint refuses one wherever it sits (a chat message part, a quarantine id)."""
    stack: list[tuple[str, object]] = [("body", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if lone_surrogate(value) is not None:
                return where
        elif isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str) and lone_surrogate(k) is not None:
                    return f"{where} (a key)"
                stack.append((f"{where}.{k}", v))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
    return None


class UnicodeBody(BaseModel):
    """A request body whose strings, however deeply nested, are valid Unicode (422 before
    the key is charged; issue #27, root cause 8 and the hostile pass)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_lone_surrogates(cls, data: Any) -> Any:
        where = first_bad_string(data)
        if where is not None:
            where = where.encode("utf-8", "backslashreplace").decode()
            raise ValueError(f"{where} is not valid Unicode (it holds a lone surrogate)")
        return data


class _Body(UnicodeBody):
    @field_validator("*")
    @classmethod
    def _unicode(cls, v: object, info: ValidationInfo) -> object:
        """Every string of a request (ids, titles, defense names too) must be valid Unicode:
        a lone surrogate reached a UTF-8 writer and was a 500 charged to the key (issue #27,
        root cause 8); now it is a 422 before the key is charged."""
        for s in v if isinstance(v, list) else [v]:
            if isinstance(s, str) and lone_surrogate(s) is not None:
                raise ValueError(
                    f"the {info.field_name} is not valid Unicode (it holds a lone surrogate)"
                )
        return v


class AskRequest(_Body):
    question: Annotated[str, _non_blank("question")] = Field(description="The user's question.")
    k: StrictInt | None = Field(
        default=None, ge=1, description="Passages to retrieve (server default)."
    )
    defenses: list[str] | None = Field(
        default=None, description="Defense names to run, from the server's allowed list."
    )


class PassageIn(_Body):
    id: str = Field(min_length=1, max_length=255)
    text: Annotated[str, _non_blank("passage text")]
    title: str = ""
    score: float | None = Field(
        default=None, description="Retriever score; default: cosine similarity to the query."
    )


class FilterRequest(_Body):
    query: Annotated[str, _non_blank("query")]
    passages: list[PassageIn]
    defenses: list[str] | None = None


class Removal(BaseModel):
    """One passage (or sentence) a defense removed, and why."""

    index: int
    id: str
    unit: str
    reason: str
    scores: dict[str, float | None]


class StageReport(BaseModel):
    defense: str
    kept_ids: list[str]
    removed: list[Removal]
    seconds: float


class ThrottleReport(BaseModel):
    action: str
    kind: str
    reason: str
    delay_ms: float


class AskResponse(BaseModel):
    request_id: str
    answer: str
    passage_ids: list[str] = Field(description="Passages that reached the generator.")
    retrieved_ids: list[str]
    defenses: list[StageReport]
    throttle: ThrottleReport | None = None
    timings_ms: dict[str, float]


class PassageOut(BaseModel):
    id: str
    text: str


class FilterResponse(BaseModel):
    request_id: str
    kept: list[PassageOut]
    removed_ids: list[str]
    defenses: list[StageReport]
    timings_ms: dict[str, float]


class ErrorResponse(BaseModel):
    detail: str


class KeyUsage(BaseModel):
    id: str
    name: str
    scopes: list[str]
    revoked: bool
    requests: int
    throttled: int
    coverage: int
    blocked_until: float | None
    block_reason: str | None


class HealthResponse(BaseModel):
    status: str
    version: str
    schema_version: int
    passages: int
    encoder: str
    defenses: list[str]
    generator: str
