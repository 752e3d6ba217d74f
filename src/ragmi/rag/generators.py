"""Generators behind the target RAG system (and behind the attacker LLM of offline query generation).

Every backend answers a batch of requests (:func:`make_request`) with dicts ``{"response_text",
"first_token_logprobs", "token_logprobs", "token_top_logprobs", "prompt_tokens", "completion_tokens",
"latency_s"}``: ``token_top_logprobs`` are the top-K alternatives of every generated token, one list
``[{"token", "logprob"}]`` per position (K = ``top_logprobs``; ``[]`` when K = 0), what a gray-box
attack reads to find where the answer says Yes or No; ``first_token_logprobs`` is its first list
(kept as it was, so responses cached before ``token_top_logprobs`` existed stay readable);
``token_logprobs`` the log-probability of every generated token (response perplexity).

* :class:`OpenAIGenerator`: any OpenAI-compatible endpoint (the shared vLLM server of the ``vllm``
  backend, or an external ``base_url``), with a per-request timeout and retries; requests in flight
  are bounded for an external endpoint and unbounded for the local vLLM server (its scheduler queues).
  Requests are sent in :func:`prefix_order` (those sharing a prompt prefix one after the other, so
  that vLLM's prefix cache computes the shared part once) and answered in their original order; with
  a ``metrics_url`` it reads the server's counters around each batch (``ragmi.rag.serving_metrics``).
* :class:`TransformersGenerator`: in-process batched greedy ``generate`` (causal LMs with their chat
  template, and encoder-decoders such as Flan-T5).
* :class:`CachedGenerator`: the :class:`~ragmi.cache.ResponseCache` in front of a backend that is
  created (and its server started) only when a request misses the cache.

``generate(requests, on_result=None)`` of every backend calls ``on_result(i, result)`` as soon as the
answer to ``requests[i]`` exists (the OpenAI backend as each request finishes, the transformers backend
after each batch), before it returns the whole list.  :class:`CachedGenerator` stores each answer in
the cache right there, so a job killed midway (``kill -9``, out of memory, a pre-empted cluster job)
loses only the requests in flight: its rerun finds every earlier answer cached.  Both backends log
their progress through :class:`ragmi.progress.Progress` (answers received of those sent, answer
tokens per second, the time left; throttled, and a waiting line while the server reads the prompts).

Settings come from a validated ``generators`` entry (``ragmi.rag.factory``); no defaults here.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping

from ..cache import Claims, ResponseCache, request_key, request_payload
from ..errors import ConfigError, EndpointError
from ..hardware import choose_dtype
from ..models import load_error
from ..progress import LOG_HEARTBEAT_S, Progress, duration


def make_request(messages, max_tokens, top_logprobs=0, temperature=0.0, seed=0) -> dict:
    return {
        "messages": messages,
        "max_tokens": int(max_tokens),
        "top_logprobs": int(top_logprobs),
        "temperature": float(temperature),
        "seed": int(seed),
    }


def prefix_order(requests: list[dict]) -> list[int]:
    """The indices of ``requests`` in the order to send them: sorted by their messages as the chat
    template lays them out (role and text of each message in turn), so that requests sharing a prompt
    prefix (the same system message, the same retrieved context after the same instructions) are
    adjacent; ties keep their original order.  Sorting strings puts each one next to those it shares
    the longest prefix with, which is what a prefix cache with LRU eviction rewards.  How much the
    prompts of a template share depends on where it puts the question: see ``ragmi.rag.templates``.
    """
    keys = [tuple(x for m in r["messages"] for x in (m["role"], m["content"])) for r in requests]
    return sorted(range(len(requests)), key=keys.__getitem__)


class ChatConnectionError(Exception):
    """The endpoint could not be reached (connection refused, reset, timed out), after the retries."""


class ChatStatusError(Exception):
    """The endpoint answered an HTTP error status (after the retries, for those worth retrying)."""

    def __init__(self, status_code: int, message: str):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.message = message


# The OpenAI SDK's retry policy (openai 3.x, _base_client): these statuses, 5xx, and any connection
# error or timeout are retried (an ``x-should-retry`` header overrides), after min(0.5 * 2**n, 8) s
# less up to 25 % jitter, or after the server's Retry-After when it asks for at most 60 s.
RETRY_STATUSES = frozenset({408, 409, 429})
RETRY_BASE_S, RETRY_MAX_S, RETRY_AFTER_MAX_S = 0.5, 8.0, 60.0


def retry_delay(attempt: int, retry_after: str | None) -> float:
    """Seconds to wait before retry number ``attempt`` (0 = the first retry)."""
    if retry_after:
        try:
            asked = float(retry_after)
        except ValueError:
            asked = None
        if asked is not None and 0 < asked <= RETRY_AFTER_MAX_S:
            return asked
    import random

    delay = min(RETRY_BASE_S * 2**attempt, RETRY_MAX_S)
    return delay * (1 - 0.25 * random.random())


CLAIM_POLL_S = 1.0  # how often a job looks for answers another job claimed (ragmi.cache.Claims)
STALL_POLL_S = 5.0  # how often OpenAIGenerator._stall_watch reads the local server's counters


class ServerStalled(Exception):
    """The local model server made no progress for the generator's timeout_s."""


class ChatClient:
    """The one call of an OpenAI-compatible API that ragmi makes — ``POST {base_url}/chat/completions``,
    :meth:`create` returning the decoded JSON answer — on ``httpx`` directly, with the OpenAI SDK's
    connection limits, timeout and retry policy (:func:`retry_delay`).
    Why not the SDK: importing ``openai`` takes 0.9 s of CPU here (its pydantic models), ``httpx`` 0.3 s,
    and every model job of the local server's chain paid it while the server waited (docs/provenance.md
    #vllm-cpu); parsing each answer into pydantic models cost CPU beside the server too."""

    def __init__(self, base_url: str, api_key: str, timeout: float, max_retries: int, *, read_timeout: bool = True):
        import httpx

        self._httpx = httpx
        self.max_retries = max(0, int(max_retries))
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/",
            # read_timeout=False: no deadline on the answer itself (a local server watched for progress
            # instead, OpenAIGenerator._stall_watch); connecting and sending keep theirs
            timeout=httpx.Timeout(timeout, read=timeout if read_timeout else None),
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),  # the SDK's limits
        )

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self._http.aclose()

    async def create(self, **body) -> dict:
        httpx = self._httpx
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                resp = await self._http.post("chat/completions", json=body)
            except (httpx.TimeoutException, httpx.TransportError) as e:
                if last:
                    raise ChatConnectionError(str(e) or type(e).__name__) from None
                await asyncio.sleep(retry_delay(attempt, None))
                continue
            if resp.status_code < 400:
                return resp.json()
            should = resp.headers.get("x-should-retry")  # the server's own say, as the SDK reads it
            retry = should == "true" or (
                should != "false" and (resp.status_code in RETRY_STATUSES or resp.status_code >= 500)
            )
            if not last and retry:
                await asyncio.sleep(retry_delay(attempt, resp.headers.get("retry-after")))
                continue
            raise ChatStatusError(resp.status_code, _error_message(resp))
        raise AssertionError("unreachable")


def _error_message(resp) -> str:
    """The ``error.message`` of an OpenAI-style error body (or the top-level ``message`` of vLLM's
    older ``{"object": "error", "message": …}``), else the body's text (shortened), on one line."""
    try:
        body = resp.json()
    except ValueError:
        return " ".join(resp.text[:300].split())
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return " ".join(str(err["message"]).split())
    if isinstance(err, str):
        return " ".join(err.split())
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"].strip():
        return " ".join(body["message"].split())
    return " ".join(resp.text[:300].split())


class OpenAIGenerator:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str,
        *,
        concurrency: int | None,
        timeout: float,
        max_retries: int,
        log: Callable = print,
        metrics_url: str | None = None,
        order_by_prefix: bool = True,
    ):
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.concurrency = None if concurrency is None else max(1, int(concurrency))  # None: all at once
        self.timeout = timeout
        self.max_retries = max_retries
        self.log = log
        self.metrics_url = metrics_url  # the server's Prometheus /metrics (local vLLM), or None
        self.order_by_prefix = order_by_prefix
        self.usage: list[dict] = []  # one serving_metrics.account record per generate call

    async def _one(self, client, sem, req):
        kwargs = dict(
            model=self.model,
            messages=req["messages"],
            max_tokens=req["max_tokens"],
            temperature=req["temperature"],
            seed=req["seed"],
        )
        # The sampled tokens' log-probabilities always come back (response perplexity, S2MIA); the
        # top-K alternatives of each token only when asked (gray-box first-token attacks).
        kwargs["logprobs"] = True
        if req["top_logprobs"] > 0:
            kwargs["top_logprobs"] = req["top_logprobs"]
        async with sem:
            t0 = time.perf_counter()
            resp = await client.create(**kwargs)
            latency = time.perf_counter() - t0
        choice = resp["choices"][0]
        first, token_lps, tops = [], [], []
        content = (choice.get("logprobs") or {}).get("content")
        if content:
            token_lps = [float(t["logprob"]) for t in content]
            if req["top_logprobs"] > 0:
                tops = [
                    [{"token": a["token"], "logprob": float(a["logprob"])} for a in (t.get("top_logprobs") or [])]
                    for t in content
                ]
                first = tops[0]
        usage = resp.get("usage") or {}
        return {
            "response_text": choice["message"].get("content") or "",
            "first_token_logprobs": first,
            "token_logprobs": token_lps,
            "token_top_logprobs": tops,
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "latency_s": latency,
        }

    async def _heartbeat(self, progress: Progress):
        """While answers are awaited: the waiting line (ragmi.progress), with the server's counters
        when it has them (read in a thread: the event loop keeps receiving answers)."""
        from . import serving_metrics as sm

        while True:
            await asyncio.sleep(1.0)
            if progress.heartbeat_due():
                server = await asyncio.to_thread(sm.scrape, self.metrics_url, 2.0) if self.metrics_url else None
                progress.heartbeat(server)

    async def _stall_watch(self, progress: Progress, poll_s: float | None = None):
        """The local server's answers have no deadline of their own: a batch that a slow or busy CPU
        takes longer than ``timeout_s`` to answer is still being answered, and a request abandoned at
        its deadline and sent again would start its prompt over.  Instead the server's token counters
        (``/metrics``) are read every ``poll_s``: the job stops (:class:`ServerStalled`) when they and the
        answers received have not moved for ``timeout_s`` while answers are awaited, or when the
        server has not answered its ``/metrics`` for as long (it is gone or hung)."""
        from . import serving_metrics as sm

        poll_s = STALL_POLL_S if poll_s is None else poll_s
        last_state, last_change = None, time.monotonic()
        while True:
            await asyncio.sleep(poll_s)
            server = await asyncio.to_thread(sm.scrape, self.metrics_url, min(5.0, self.timeout))
            now = time.monotonic()
            state = (
                progress.done,
                None if server is None else (server.get("prompt_tokens"), server.get("generation_tokens")),
            )
            if state != last_state and state[1] is not None:
                last_state, last_change = state, now
            elif progress.done < progress.total and now - last_change >= self.timeout:
                what = (
                    "did not answer its /metrics"
                    if server is None
                    else "read no prompt token, wrote no answer token and finished no answer"
                )
                raise ServerStalled(
                    f"the local model server at {self.base_url} {what} for {duration(now - last_change)} while "
                    f"{progress.total - progress.done} answers were awaited (the generator's timeout_s: "
                    f"{self.timeout:g} s); the answers received are cached, a rerun resumes from them"
                )

    async def _run(self, requests, on_result=None, server_before=None):
        sem = asyncio.Semaphore(self.concurrency or len(requests))
        self.log(f"  {min(self.concurrency or len(requests), len(requests))} requests in flight at most")
        progress = Progress(len(requests), self.log, server_before=server_before)
        results = [None] * len(requests)
        watched = self.metrics_url is not None  # the local vLLM server: watched for progress, no answer deadline
        async with ChatClient(
            base_url=self.base_url,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
            read_timeout=not watched,
        ) as client:

            async def run(i, req):
                results[i] = await self._one(client, sem, req)
                if on_result is not None:
                    on_result(i, results[i])
                progress.add(1, results[i]["completion_tokens"])

            order = prefix_order(requests) if self.order_by_prefix else range(len(requests))
            beat = asyncio.ensure_future(self._heartbeat(progress))
            watch = asyncio.ensure_future(self._stall_watch(progress)) if watched else None
            try:
                # tasks start, and take the semaphore, in this order: the server receives them so
                work = asyncio.ensure_future(asyncio.gather(*(run(i, requests[i]) for i in order)))
                if watch is None:
                    await work
                else:
                    await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
                    if not work.done():  # the watch ended: the server stalled
                        work.cancel()
                        await asyncio.gather(work, return_exceptions=True)
                        watch.result()
                    work.result()
            except ServerStalled as e:
                raise EndpointError(str(e)) from None
            except ChatConnectionError as e:
                raise EndpointError(f"cannot reach the generator endpoint {self.base_url}: {e}") from None
            except ChatStatusError as e:
                if e.status_code == 401:
                    raise EndpointError(f"the generator endpoint {self.base_url} rejected the API key") from None
                raise EndpointError(
                    f"the generator endpoint {self.base_url} answered HTTP {e.status_code}: {e.message}"
                ) from None
            finally:
                for task in (beat, watch):
                    if task is not None:
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
        return results

    def generate(self, requests: list[dict], on_result: Callable | None = None) -> list[dict]:
        if not requests:
            return []
        from . import serving_metrics as sm

        before = sm.scrape(self.metrics_url) if self.metrics_url else None
        t0 = time.perf_counter()
        results = asyncio.run(self._run(requests, on_result, before))
        wall = time.perf_counter() - t0
        prompt = sum(r["prompt_tokens"] for r in results)
        after = sm.settle(self.metrics_url, before, prompt) if before is not None else None
        rec = sm.account(prompt, sum(r["completion_tokens"] for r in results), wall, sm.delta(before, after))
        rec["requests"] = len(requests)
        self.usage.append(rec)
        self.log("  " + sm.summary_line(rec))
        return results

    def close(self):
        pass


class TransformersGenerator:
    """In-process batched generation with Hugging Face transformers (greedy decoding)."""

    def __init__(self, model_path: str, *, batch_size: int, dtype: str, log: Callable = print):
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        self.torch = torch
        self.log = log
        t0 = time.perf_counter()
        try:
            cfg = AutoConfig.from_pretrained(model_path)
            self.seq2seq = bool(getattr(cfg, "is_encoder_decoder", False))
            self.tok = AutoTokenizer.from_pretrained(model_path)
            torch_dtype = getattr(torch, dtype) if dtype != "auto" else "auto"
            cls = AutoModelForSeq2SeqLM if self.seq2seq else AutoModelForCausalLM
            self.model = cls.from_pretrained(model_path, dtype=torch_dtype).eval()
        except Exception as e:  # noqa: BLE001 - a missing or broken model: one sentence, no traceback
            raise load_error("generator model (backend transformers)", model_path, e) from None
        if not self.seq2seq:
            self.tok.padding_side = "left"
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        self.batch_size = max(1, int(batch_size))
        log(f"transformers model {model_path} loaded in {time.perf_counter() - t0:.1f} s")

    def _prompt(self, messages) -> str:
        if not self.seq2seq and getattr(self.tok, "chat_template", None):
            return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return "\n\n".join(m["content"] for m in messages)

    def _batch(self, reqs):
        torch = self.torch
        prompts = [self._prompt(r["messages"]) for r in reqs]
        enc = self.tok(prompts, return_tensors="pt", padding=True, add_special_tokens=self.seq2seq)
        max_new = max(r["max_tokens"] for r in reqs)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                **enc,
                max_new_tokens=max_new,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.tok.pad_token_id,
            )
        latency = (time.perf_counter() - t0) / len(reqs)
        start = 0 if self.seq2seq else enc["input_ids"].shape[1]
        seqs = out.sequences[:, start:]
        if self.seq2seq:
            seqs = seqs[:, 1:]  # drop the decoder start token
        logps = [torch.log_softmax(s.float(), dim=-1) for s in out.scores]
        eos = {self.tok.eos_token_id, self.tok.pad_token_id}
        results = []
        for i, r in enumerate(reqs):
            ids = []
            for t in range(min(r["max_tokens"], seqs.shape[1])):
                tid = int(seqs[i, t])
                if tid in eos:
                    break
                ids.append(tid)
            token_lps = [float(logps[t][i, tid]) for t, tid in enumerate(ids)]
            first, tops = [], []
            if r["top_logprobs"] > 0:
                # the top-K of token 0 even when nothing was generated (an immediate end of sequence)
                for t in range(max(1, len(ids))):
                    vals, idx = torch.topk(logps[t][i], r["top_logprobs"])
                    tops.append([{"token": self.tok.decode([int(j)]), "logprob": float(v)} for v, j in zip(vals, idx)])
                first = tops[0]
                tops = tops[: len(ids)]
            results.append(
                {
                    "response_text": self.tok.decode(ids, skip_special_tokens=True),
                    "first_token_logprobs": first,
                    "token_logprobs": token_lps,
                    "token_top_logprobs": tops,
                    "prompt_tokens": int(enc["attention_mask"][i].sum()),
                    "completion_tokens": len(ids),
                    "latency_s": latency,
                }
            )
        return results

    def generate(self, requests: list[dict], on_result: Callable | None = None) -> list[dict]:
        # Batch requests of equal max_tokens together, longest prompts first (less padding).
        order = sorted(
            range(len(requests)), key=lambda i: (requests[i]["max_tokens"], -len(str(requests[i]["messages"])))
        )
        results = [None] * len(requests)
        progress = Progress(len(requests), self.log)
        for b in range(0, len(order), self.batch_size):
            idx = order[b : b + self.batch_size]
            batch = self._batch([requests[i] for i in idx])
            for i, res in zip(idx, batch):
                results[i] = res
                if on_result is not None:
                    on_result(i, res)
            progress.add(len(idx), sum(r["completion_tokens"] for r in batch))
        return results

    def close(self):
        pass


def upgrade_cached(response: dict | None, request: dict) -> dict | None:
    """A cached response as the current code returns it, or None when it must be regenerated.

    Responses cached before ``token_top_logprobs`` existed lack it: for a request without top-K
    alternatives (``top_logprobs`` 0) it is ``[]`` and the entry is complete; a request that asks for
    them is regenerated once (greedy decoding gives the same text) and its entry replaced under the
    same key.  Cache keys never change."""
    if response is None or "token_top_logprobs" in response:
        return response
    if request["top_logprobs"] > 0:
        return None
    return dict(response, token_top_logprobs=[])


class CachedGenerator:
    """Cache in front of a lazily created backend: no backend, no server, when everything hits.

    Each fresh answer is stored the moment the backend hands it over (``on_result``), not when the
    whole batch is done.  A request that appears several times in one batch is sent once.
    ``stats`` counts, over the generator's life, the requests asked for, those served from the cache
    and those generated; :meth:`summary` is the line a job logs at its end, and :meth:`serving_record`
    what the backend did for the generated ones: prompt tokens sent, prompt tokens the server actually
    computed (sent minus its prefix-cache hits, where the backend reads server counters), completion
    tokens and wall time.
    """

    def __init__(self, model_id: str, factory: Callable[[], object], cache: ResponseCache, log=print):
        self.model_id = model_id
        self.factory = factory
        self.cache = cache
        self.backend = None
        self.log = log
        self.stats = {"requests": 0, "from_cache": 0, "generated": 0}
        self.serving = {"requests": 0, "prompt_tokens_sent": 0, "completion_tokens": 0, "wall_s": 0.0}

    def generate(self, requests: list[dict]) -> list[dict]:
        keys = [request_key(self.model_id, r) for r in requests]
        results = [upgrade_cached(self.cache.get(k), r) for k, r in zip(keys, requests)]
        missing = [i for i, r in enumerate(results) if r is None]
        first: dict[str, int] = {}  # key -> the first request index that asks for it
        for i in missing:
            first.setdefault(keys[i], i)
        todo = list(first.values())
        n_hit = len(requests) - len(missing)
        repeated = len(missing) - len(todo)
        self.stats["requests"] += len(requests)
        self.stats["from_cache"] += n_hit
        self.log(
            f"{len(requests)} requests: {n_hit} from cache, {len(todo)} to generate"
            + (f" ({repeated} repeated within the batch, sent once)" if repeated else "")
        )
        self._generated_now: set[int] = set()
        claims = Claims(self.cache.dir) if todo and self.cache.dir is not None else None
        try:
            pending = todo
            while pending:
                mine, others = pending, []
                if claims is not None:
                    held = claims.take([keys[i] for i in pending])
                    others = [i for i in pending if keys[i] not in held]
                    # another job may have answered one and released its claim between this job's look
                    # into the cache and its claim
                    self.cache.refresh()
                    mine = [i for i in pending if keys[i] in held and not self._from_cache(requests, keys, results, i)]
                    claims.release([keys[i] for i in pending if keys[i] in held and results[i] is not None])
                    if others:
                        self.log(
                            f"  {len(others)} of them are being answered by another job sharing the cache "
                            f"({claims.dir}): their answers are awaited there, not asked again"
                        )
                if mine:
                    self._generate(requests, keys, results, mine, claims)
                pending = self._await_others(requests, keys, results, others, claims) if others else []
            for i in missing:
                results[i] = results[first[keys[i]]]
        finally:
            if claims is not None:
                claims.release_all()
        # generated by this job; an answer another job sharing the cache generated came from the cache
        fresh_set = {i for i in missing if first[keys[i]] in self._generated_now}
        return [dict(r, cached=i not in fresh_set) for i, r in enumerate(results)]

    def _generate(self, requests, keys, results, todo, claims) -> None:
        """Ask the backend for ``todo`` (request indices), storing each answer as it comes."""
        if self.backend is None:
            self.backend = self.factory()
        stored = set()

        def store(j: int, res: dict) -> None:
            i = todo[j]
            if i in stored:
                return
            self.cache.put(keys[i], res, request=request_payload(self.model_id, requests[i]))
            if claims is not None:
                claims.release([keys[i]])
            results[i] = res
            stored.add(i)
            self._generated_now.add(i)
            self.stats["generated"] += 1

        t0 = time.perf_counter()
        fresh = self.backend.generate([requests[i] for i in todo], on_result=store)
        self.serving["wall_s"] += time.perf_counter() - t0
        for j, res in enumerate(fresh):  # a backend that returned without reporting every result
            store(j, res)
        self.serving["requests"] += len(todo)
        self.serving["prompt_tokens_sent"] += sum(int(results[i]["prompt_tokens"]) for i in todo)
        self.serving["completion_tokens"] += sum(int(results[i]["completion_tokens"]) for i in todo)

    def _from_cache(self, requests, keys, results, i: int) -> bool:
        """Request ``i``'s answer from the cache into ``results``, if the cache has it now."""
        res = upgrade_cached(self.cache.get(keys[i]), requests[i])
        if res is None:
            return False
        results[i] = res
        self.stats["from_cache"] += 1
        return True

    def _await_others(self, requests, keys, results, others, claims) -> list[int]:
        """Wait for the answers another job claimed to reach the cache; return the requests whose
        claim was abandoned (or released) with no answer in the cache: this job asks for them itself."""
        waiting = list(others)
        orphaned: list[int] = []  # over every pass: one found orphaned while others are still awaited stays so
        last_line = time.monotonic()
        while True:
            self.cache.refresh()
            still = []
            for i in waiting:
                if self._from_cache(requests, keys, results, i):
                    continue
                (orphaned if claims.abandoned(keys[i]) else still).append(i)
            if not still:
                return orphaned
            waiting = still
            if time.monotonic() - last_line >= LOG_HEARTBEAT_S:
                self.log(f"  awaiting {len(waiting)} answers that another job sharing the cache is generating")
                last_line = time.monotonic()
            time.sleep(CLAIM_POLL_S)

    def summary(self) -> str:
        s = self.stats
        return (
            f"responses of {self.model_id}: {s['requests']} requests, {s['from_cache']} from cache, "
            f"{s['generated']} generated"
        )

    def serving_record(self) -> dict:
        """The generated requests' token accounting over the generator's life (module
        ``ragmi.rag.serving_metrics``).  ``wall_s`` is the time spent in the backend, including a
        server start-up this job paid for (``server_startup_s``); ``prompt_tokens_computed`` is None
        when the backend has no server counters, or when another job used the server meanwhile."""
        s = self.serving
        usage = list(getattr(self.backend, "usage", None) or [])
        rec = {
            "model": self.model_id,
            "requests": self.stats["requests"],
            "from_cache": self.stats["from_cache"],
            "generated": s["requests"],
            "prompt_tokens_sent": s["prompt_tokens_sent"],
            "prompt_tokens_computed": None,
            "prefix_cache_hit_tokens": None,
            "prefix_cache_hit_rate": None,
            "completion_tokens": s["completion_tokens"],
            "wall_s": round(s["wall_s"], 3),
            "server_startup_s": getattr(self.backend, "startup_s", None),
            "generate_calls": usage,
        }
        if s["requests"] == 0:
            rec.update(prompt_tokens_computed=0, prefix_cache_hit_tokens=0)
        elif usage and all(u.get("prefix_cache_hit_tokens") is not None for u in usage):
            hits = sum(u["prefix_cache_hit_tokens"] for u in usage)
            rec["prefix_cache_hit_tokens"] = hits
            rec["prompt_tokens_computed"] = s["prompt_tokens_sent"] - hits
            rec["prefix_cache_hit_rate"] = round(hits / s["prompt_tokens_sent"], 4) if s["prompt_tokens_sent"] else None
        return rec

    def serving_summary(self) -> str:
        r = self.serving_record()
        computed = (
            f"{r['prompt_tokens_computed']} computed ({r['prefix_cache_hit_tokens']} prefix-cache hits)"
            if r["prompt_tokens_computed"] is not None
            else "computed unknown"
        )
        startup = f", of which server start-up {r['server_startup_s']:.1f} s" if r["server_startup_s"] else ""
        return (
            f"serving of {self.model_id}: {r['generated']} requests generated; prompt tokens {r['prompt_tokens_sent']} "
            f"sent, {computed}; {r['completion_tokens']} completion tokens; {r['wall_s']:.1f} s{startup}"
        )

    def close(self):
        if self.backend is not None:
            self.backend.close()
            self.backend = None


NO_API_KEY = "EMPTY"  # what the OpenAI client sends to an endpoint that checks no key


def api_key_from_env(var: str | None) -> str:
    if not var:
        return NO_API_KEY
    key = os.environ.get(var)
    if not key:
        raise ConfigError(f"the generator's API key is read from the environment variable {var}, which is not set")
    return key


def generator_model_id(gen_cfg: Mapping) -> str:
    """The identity under which responses are cached: backend + endpoint + model + the precision it
    computes in (ragmi.hardware.DtypeChoice.cache_token: ``auto`` where it still computes what ``auto``
    meant before the rule, so older answers stay served, the dtype's name where it now computes another)."""
    where = gen_cfg.get("base_url", "local")  # base_url exists only for backend 'openai'
    token = choose_dtype(gen_cfg["dtype"], gen_cfg["backend"]).cache_token
    return f"{gen_cfg['backend']}|{where}|{gen_cfg['model']}|{token}"
