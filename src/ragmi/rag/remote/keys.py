"""The keys of a remote target's ``remote`` block and the checks that they fit together (called by
``ragmi.config`` when it validates a configuration; the schema, ``config/schema.yaml`` ``$defs.remote``,
checks each key alone).

Only the standard library and ``ragmi.errors``: ``ragmi.config`` imports this module.
"""

from __future__ import annotations

import json

from ...errors import ConfigError

# The keys that shape a streamed answer of api json (read only with stream: true).
STREAM_JSON_KEYS = (
    "stream_path",
    "stream_event_path",
    "stream_text_events",
    "stream_end_event",
    "stream_error_event",
    "stream_replace_event",
)
# Every key of the session feature (all of them api json only: check_session).
SESSION_KEYS = ("session_open_path", "session_id_path", "session", "session_id")
# Those the cache identity takes as they are set (RemoteClient.model_id writes ``session`` normalised).
SESSION_IDENTITY_KEYS = tuple(k for k in SESSION_KEYS if k != "session")


def check_remote_target(name: str, t: dict) -> None:
    """A remote target has none of an in-process target's keys (retriever, generator, defenses)."""
    where = f"config key targets.{name}"
    for key in ("retriever", "generator"):
        if key in t:
            raise ConfigError(f"{where}.{key}: a remote target does its own retrieval and generation; remove the key")
    if t["defenses"]:
        raise ConfigError(
            f"{where}.defenses: a remote target's defenses are the service's own; ragmi cannot add hooks to "
            "it (serve a defended ragmi target with `ragmi serve-target` instead)"
        )
    check_remote_api(f"{where}.remote", t["remote"])


def check_remote_api(where: str, r: dict) -> None:
    """The ``remote`` block: the keys its ``api`` needs and none that only the other api reads."""
    if r["api"] == "json":
        for key in ("body", "answer_path"):
            if key not in r:
                raise ConfigError(f"{where}.{key}: required for api 'json'")
        if r["logprobs"] and not ("token_logprobs_path" in r or "top_logprobs_path" in r):
            raise ConfigError(f"{where}.logprobs: true needs token_logprobs_path or top_logprobs_path for api 'json'")
    else:
        for key in ("body", "answer_path", "token_logprobs_path", "top_logprobs_path", *STREAM_JSON_KEYS):
            if key in r:
                raise ConfigError(f"{where}.{key}: only used with api 'json' (api is 'openai')")
        if r["path"]:
            raise ConfigError(f"{where}.path: only used with api 'json' (api openai posts to <url>/chat/completions)")
    if r["api"] == "json" and r["stream"]:
        if "stream_path" not in r:
            raise ConfigError(f"{where}.stream_path: required for a streamed answer of api 'json' (stream: true)")
        if r["logprobs"]:
            raise ConfigError(
                f"{where}.logprobs: a streamed answer of api 'json' is read without log-probabilities; "
                "set stream: false or logprobs: false"
            )
    elif r["api"] == "json":
        for key in STREAM_JSON_KEYS:
            if key in r:
                raise ConfigError(f"{where}.{key}: only used with stream: true")
    check_session(where, r)
    if "sources_path" in r and r["sources_path"].count("*") > 1:
        raise ConfigError(f"{where}.sources_path: at most one '*' (the list of sources), got {r['sources_path']!r}")
    if r.get("api_key_env") is not None and not r["api_key_env"].strip():
        raise ConfigError(f"{where}.api_key_env: must name an environment variable")


def check_session(where: str, r: dict) -> None:
    """The session keys (:class:`~ragmi.rag.remote.client.RemoteClient`'s sessions): api json only; an
    opened session needs the path of its id and a place for it; a fixed ``session_id`` opens none."""
    used = [k for k in SESSION_KEYS if k in r]
    if not used:
        return
    if r["api"] != "json":
        raise ConfigError(f"{where}.{used[0]}: only used with api 'json' (api is 'openai')")
    if "session_id" in r and "session_open_path" in r:
        raise ConfigError(
            f"{where}.session_id: a fixed session opens none; remove session_open_path (or session_id to "
            "open a session per query)"
        )
    if "session_open_path" not in r and "session_id" not in r:
        raise ConfigError(f"{where}.{used[0]}: only used with session_open_path (or a fixed session_id)")
    if "session_open_path" in r and "session_id_path" not in r:
        raise ConfigError(f"{where}.session_id_path: required with session_open_path (where its answer holds the id)")
    if "session_id" in r and ("session_id_path" in r or "session" in r):
        key = "session_id_path" if "session_id_path" in r else "session"
        raise ConfigError(f"{where}.{key}: only used with session_open_path (a fixed session_id opens none)")
    if "{session_id}" not in r["path"] and "{session_id}" not in json.dumps(r.get("body"), ensure_ascii=False):
        raise ConfigError(
            f"{where}.path: a session is used but neither path nor body says where its id goes ({{session_id}})"
        )
