"""Reading a remote service's answer out of a stream of server-sent events (``stream: true``):
OpenAI's chat-completion chunks, or any event stream whose text pieces sit at ``stream_path``."""

from __future__ import annotations

import json
from collections.abc import Mapping

from ...errors import EndpointError
from .mapping import _MISSING, _top_list, json_path
from .responses import ResponseParser, error_text, one_line


class _PartialStream(Exception):
    """A streamed answer cut off before its end marker: not an answer (retried, then an error)."""


def sse_events(text: str) -> list[tuple[str, str]]:
    """The (event type, data) of every event of a server-sent event stream (the WHATWG HTML
    standard's event-stream format: fields ``event:`` and ``data:``, several data lines joined by a
    newline, events ended by a blank line, ``:`` comments ignored); the type is ``message`` when the
    event names none.  An event not ended by a blank line (a cut-off stream) is still returned: the
    callers tell a complete stream by its end marker."""
    out, name, data = [], "", []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if data:
                out.append((name or "message", "\n".join(data)))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data:
        out.append((name or "message", "\n".join(data)))
    return out


class StreamParser(ResponseParser):
    """The answer of a server-sent event stream, in the same format as :meth:`ResponseParser.parse`'s
    (mixed into :class:`~ragmi.rag.remote.client.RemoteClient`)."""

    def parse_stream(self, data: bytes, req: Mapping, latency: float) -> dict:
        """The answer of a server-sent event stream (``stream: true``): OpenAI's chat-completion
        chunks up to ``data: [DONE]`` (api openai), or events whose text pieces sit at
        ``stream_path`` (api json).  A stream without its end marker raises :class:`_PartialStream`."""
        events = sse_events(data.decode("utf-8", "replace"))
        if self.cfg["api"] == "openai":
            return self._openai_stream(events, req, latency)
        return self._json_stream(events, latency)

    def _openai_stream(self, events, req, latency) -> dict:
        cfg, k = self.cfg, int(req["top_logprobs"])
        pieces, token_lps, tops, usage, done, seen = [], [], [], None, False, False
        for _, payload in events:
            if payload.strip() == "[DONE]":
                done = True
                break
            chunk = self._json(payload, "streamed an event that is not JSON")
            if isinstance(chunk, Mapping) and chunk.get("error"):
                raise EndpointError(
                    f"the remote endpoint {self.endpoint} streamed an error ({self.where}): "
                    f"{self._clean(one_line(error_text(chunk)))}"
                )
            if json_path(chunk, "usage") not in (_MISSING, None):
                usage = json_path(chunk, "usage")
            delta = json_path(chunk, "choices.0.delta")
            if delta is _MISSING:
                continue
            seen = True
            piece = json_path(chunk, "choices.0.delta.content")
            if isinstance(piece, str):
                pieces.append(piece)
            content = json_path(chunk, "choices.0.logprobs.content")
            if isinstance(content, list):
                token_lps += [float(t["logprob"]) for t in content]
                if k > 0:
                    tops += [_top_list(t.get("top_logprobs"), k) for t in content]
        if not done:
            raise _PartialStream(f"the stream ended before its 'data: [DONE]' line ({len(pieces)} pieces received)")
        if cfg["logprobs"] and seen and not token_lps and "".join(pieces):
            raise EndpointError(
                f"the remote endpoint {self.endpoint} streamed no choices.0.logprobs.content, but "
                f"{self.where}.logprobs is true (set it to false for an endpoint without log-probabilities)"
            )
        text = "".join(pieces) if seen else _MISSING
        pt = json_path(usage, "prompt_tokens") if usage else _MISSING
        ct = json_path(usage, "completion_tokens") if usage else _MISSING
        return self._answer(text, "choices.0.delta.content", token_lps, tops, pt, ct, [], latency)

    def _json_stream(self, events, latency) -> dict:
        cfg = self.cfg
        want = set(cfg["stream_text_events"]) if "stream_text_events" in cfg else None
        end_event, error_event = cfg.get("stream_end_event"), cfg.get("stream_error_event")
        replace_event = cfg.get("stream_replace_event")
        pieces, last, end, seen, replaced = [], {}, None, False, False
        for name, payload in events:
            if payload.strip() == "[DONE]":
                end = end if end is not None else last
                break
            doc = self._json(payload, "streamed an event that is not JSON")
            kind = json_path(doc, cfg["stream_event_path"]) if "stream_event_path" in cfg else name
            if kind is not _MISSING and not isinstance(kind, str):
                kind = json.dumps(kind)  # MaxKB's is_end: true / false
            if error_event is not None and kind == error_event:
                raise EndpointError(
                    f"the remote endpoint {self.endpoint} streamed an error event ({self.where}): "
                    f"{self._clean(one_line(error_text(doc)))}"
                )
            if replace_event is not None and kind == replace_event:
                # Dify's message_replace: its answer replaces all the text so far; later pieces append
                piece = json_path(doc, cfg["stream_path"])
                if isinstance(piece, str):
                    pieces, seen, replaced = [piece], True, True
            elif want is None or kind in want:
                piece = json_path(doc, cfg["stream_path"])
                if isinstance(piece, str):
                    pieces.append(piece)
                    seen = True
            last = doc
            if end_event is not None and kind == end_event:
                end = doc
                break
        if end_event is not None and end is None:
            raise _PartialStream(f"the stream ended before its {end_event!r} event ({len(pieces)} pieces received)")
        final = end if end is not None else last
        pt = json_path(final, cfg["prompt_tokens_path"]) if "prompt_tokens_path" in cfg else _MISSING
        ct = json_path(final, cfg["completion_tokens_path"]) if "completion_tokens_path" in cfg else _MISSING
        text = "".join(pieces) if seen or end is not None else _MISSING
        flag = replaced if replace_event is not None else None  # None: the stream cannot say
        return self._answer(text, cfg["stream_path"], [], [], pt, ct, self._sources(final), latency, flag)
