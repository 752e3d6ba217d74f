"""Reading a remote service's answer out of one JSON response (``stream: false``), and its error
message out of an error response, on one line."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from ...errors import EndpointError
from .mapping import _MISSING, _top_list, json_path, sources_at


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (runs of white space folded), shortened to ``limit`` characters."""
    t = " ".join(str(text).split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def error_text(doc) -> str:
    """The message of an error body: OpenAI's ``error.message``, ``message``, ``detail`` or ``error``
    (Dify, FastAPI, others), else the whole body."""
    if isinstance(doc, Mapping):
        err = doc.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        for key in ("message", "detail", "error", "msg"):
            if isinstance(doc.get(key), str) and doc[key].strip():
                return doc[key]
    return json.dumps(doc, ensure_ascii=False) if not isinstance(doc, str) else doc


def server_message(data: bytes) -> str:
    """The server's error message in an error response, on one line."""
    text = data.decode("utf-8", "replace").strip()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return one_line(text)
    return one_line(error_text(doc))


class ResponseParser:
    """The answer of one JSON response in the generators' response format (``ragmi.rag.generators``);
    mixed into :class:`~ragmi.rag.remote.client.RemoteClient`, whose ``cfg`` (the ``remote`` block),
    ``endpoint`` and ``where`` (the config key, for error messages) it reads, and whose ``_clean``
    keeps the API key out of every message."""

    cfg: dict
    endpoint: str
    where: str
    _clean: Callable[[str], str]

    def _json(self, data: bytes, what: str = "answered with something that is not JSON"):
        try:
            return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise EndpointError(
                f"the remote endpoint {self.endpoint} {what}: "
                f"{self._clean(data[:120].decode('utf-8', 'replace') if isinstance(data, bytes) else data[:120])!r}"
            ) from None

    def parse(self, data: bytes, req: Mapping, latency: float) -> dict:
        where, cfg = self.where, self.cfg
        doc = self._json(data)
        k = int(req["top_logprobs"])
        token_lps, tops = [], []
        if cfg["api"] == "openai":
            answer_path = "choices.0.message.content"
            text = json_path(doc, answer_path)
            if text is None and json_path(doc, "choices.0.message") is not _MISSING:
                text = ""  # OpenAI's null content: an empty answer
            if cfg["logprobs"]:
                content = json_path(doc, "choices.0.logprobs.content")
                if content is _MISSING or content is None:
                    raise EndpointError(
                        f"the remote endpoint {self.endpoint} answered without choices.0.logprobs.content, but "
                        f"{where}.logprobs is true (set it to false for an endpoint without log-probabilities)"
                    )
                token_lps = [float(t["logprob"]) for t in content]
                if k > 0:
                    tops = [_top_list(t.get("top_logprobs"), k) for t in content]
            pt = json_path(doc, "usage.prompt_tokens")
            ct = json_path(doc, "usage.completion_tokens")
        else:
            answer_path = cfg["answer_path"]
            text = json_path(doc, answer_path)
            if cfg["logprobs"]:
                if "token_logprobs_path" in cfg:
                    v = json_path(doc, cfg["token_logprobs_path"])
                    if v is _MISSING or not isinstance(v, list):
                        raise EndpointError(
                            f"the remote endpoint {self.endpoint} answered without a list at "
                            f"{cfg['token_logprobs_path']!r} ({where}.token_logprobs_path)"
                        )
                    token_lps = [float(x) for x in v]
                if "top_logprobs_path" in cfg and k > 0:
                    v = json_path(doc, cfg["top_logprobs_path"])
                    if v is _MISSING or not isinstance(v, list):
                        raise EndpointError(
                            f"the remote endpoint {self.endpoint} answered without a list at "
                            f"{cfg['top_logprobs_path']!r} ({where}.top_logprobs_path)"
                        )
                    tops = [_top_list(x, k) for x in v]
            pt = json_path(doc, cfg["prompt_tokens_path"]) if "prompt_tokens_path" in cfg else _MISSING
            ct = json_path(doc, cfg["completion_tokens_path"]) if "completion_tokens_path" in cfg else _MISSING
        return self._answer(text, answer_path, token_lps, tops, pt, ct, self._sources(doc), latency)

    def _sources(self, doc) -> list[str]:
        return sources_at(doc, self.cfg["sources_path"]) if "sources_path" in self.cfg else []

    def _answer(self, text, answer_path, token_lps, tops, pt, ct, sources, latency, replaced=None) -> dict:
        where, cfg = self.where, self.cfg
        if text is _MISSING:
            raise EndpointError(
                f"the remote endpoint {self.endpoint} answered without the answer field {answer_path!r}"
                + (f" ({where}.answer_path)" if cfg["api"] == "json" else f" ({where}.api is openai)")
            )
        if not isinstance(text, str):
            raise EndpointError(
                f"the remote endpoint {self.endpoint} answered a {type(text).__name__} at {answer_path!r}, not text"
                + (f" ({where}.answer_path)" if cfg["api"] == "json" else "")
            )
        if not text.strip() and cfg["on_empty_answer"] == "error":
            raise EndpointError(
                f"the remote endpoint {self.endpoint} answered an empty answer at {answer_path!r} "
                f"({where}.on_empty_answer: error; set it to keep to accept empty answers)"
            )
        return {
            "response_text": text,
            "first_token_logprobs": tops[0] if tops else [],
            "token_logprobs": token_lps,
            "token_top_logprobs": tops,
            "prompt_tokens": int(pt) if isinstance(pt, int | float) else 0,
            "completion_tokens": int(ct) if isinstance(ct, int | float) else 0,
            "latency_s": latency,
            "sources": sources,
            "answer_replaced": replaced,
        }
