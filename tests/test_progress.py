"""ragmi.progress: a model job's progress lines, throttled on a terminal, a few per job in a log file;
and the generators that log through it."""

import io
import re

import pytest
from stand_in import StandIn, openai_body

from ragmi import progress as pg
from ragmi.progress import Progress, duration, is_interactive
from ragmi.rag.generators import OpenAIGenerator, TransformersGenerator, make_request


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def counts(lines):
    return [int(re.match(r"  generated (\d+)/", x).group(1)) for x in lines]


def test_a_terminal_gets_a_line_every_few_seconds_and_the_last():
    clock, lines = Clock(), []
    p = Progress(10, lines.append, interactive=True, clock=clock)
    for t in (1, 2, 6, 7, 8, 11.5, 12, 13, 14):  # answers 1..9
        clock.t = 1000 + t
        p.add(1, 5)
    clock.t = 1014.2
    p.add(1, 5)  # the 10th: always, however soon
    assert counts(lines) == [3, 6, 10]
    assert lines[-1] == "  generated 10/10 in 14 s, 3.5 answer tokens/s"
    assert p.add(1) is None  # nothing after the last


def test_a_log_file_gets_a_line_per_quarter():
    clock, lines = Clock(), []
    p = Progress(40, lines.append, interactive=False, clock=clock)
    for _ in range(40):
        clock.t += 0.5
        p.add(1)
    assert counts(lines) == [10, 20, 30, 40]  # the old code logged every 10%: 10 lines
    burst = []
    q = Progress(40, burst.append, interactive=False, clock=clock)
    q.add(25)  # two quarters at once: one line
    q.add(15)
    assert counts(burst) == [25, 40]
    tiny = []
    r = Progress(2, tiny.append, interactive=False, clock=clock)
    r.add(1)
    r.add(1)
    assert counts(tiny) == [1, 2]


def test_waiting_lines_with_the_servers_counters_every_15_s_on_a_terminal_every_minute_in_a_log():
    clock, lines = Clock(), []
    before = {"prompt_tokens": 1000.0, "generation_tokens": 50.0}
    p = Progress(74, lines.append, interactive=True, clock=clock, server_before=before)
    clock.t += 14
    assert not p.heartbeat_due() and p.heartbeat() is None
    clock.t += 1
    line = p.heartbeat({"prompt_tokens": 4000.0, "generation_tokens": 50.0})
    assert line == (
        "  generated 0/74 after 15 s, 74 awaited; the model server has read 3,000 prompt tokens (200/s) "
        "and written 0 answer tokens since they were sent"
    )
    clock.t += 5
    assert not p.heartbeat_due()  # the next one 15 s after this line
    clock.t += 10
    assert p.heartbeat(None) == "  generated 0/74 after 30 s, 74 awaited"  # no counters (another endpoint)
    in_log = []
    log = Progress(74, in_log.append, interactive=False, clock=clock)
    clock.t += 59
    assert not log.heartbeat_due() and log.heartbeat({"prompt_tokens": 1.0}) is None
    clock.t += 1
    assert log.heartbeat(None) == "  generated 0/74 after 1 min 00 s, 74 awaited"
    assert in_log == ["  generated 0/74 after 1 min 00 s, 74 awaited"]


def test_a_log_gets_a_progress_line_at_least_every_minute_while_answers_come_slowly():
    clock, lines = Clock(), []
    p = Progress(400, lines.append, interactive=False, clock=clock)
    for _ in range(30):  # 30 answers, one every 10 s: no quarter crossed in 300 s
        clock.t += 10
        p.add(1)
    assert counts(lines) == [6, 12, 18, 24, 30]  # at 60, 120, ... s: never more than a minute apart


def test_time_left_is_reckoned_from_the_answers_not_the_wait_before_them():
    """All requests are sent at once; the first answer comes after 145 s of prompt reading; the time
    left follows the answers' own rate, not 145 s per answer."""
    clock, lines = Clock(), []
    p = Progress(74, lines.append, interactive=True, clock=clock)
    clock.t += 145
    p.add(1)
    assert lines == ["  generated 1/74 after 2 min 25 s"]  # one answer: no rate yet
    for _ in range(6):
        clock.t += 1.5
        p.add(1)  # 7 answers, 6 of them in 9 s; a line at the 5th (5 s after the 1st)
    assert lines[-1] == "  generated 5/74 after 2 min 31 s; about 1 min 44 s left at the recent rate"
    assert p.rate(clock.t) == pytest.approx(6 / 9)  # not 7 / 154: the wait before the first answer
    # a minute later the rate is the last minute's
    clock.t += 60
    p.add(1)
    assert p.rate(clock.t) == pytest.approx(1 / 60)


def test_a_step_logs_lines_name_its_job(tmp_path):
    """Snakemake's job blocks are off the console (make run's --quiet rules): the lines say the job."""
    from ragmi.workflow import StepLog

    path = tmp_path / "logs" / "generate" / "synthetic" / "pad" / "s2mia" / "00000.log"
    path.parent.mkdir(parents=True)  # Snakemake makes a job's log folder
    log = StepLog(str(path))
    clock = Clock()
    p = Progress(2, log, interactive=False, clock=clock)
    clock.t += 3
    assert p.add(2) == "  generated 2/2 [generate/synthetic/pad/s2mia/00000] in 3 s"
    assert (
        "generated 2/2 [generate/synthetic/pad/s2mia/00000] in 3 s"
        in (tmp_path / "logs/generate/synthetic/pad/s2mia/00000.log").read_text()
    )
    assert pg.job_label(print) == "" and pg.job_label(StepLog(None)) == ""
    assert pg.job_label(StepLog(str(tmp_path / "elsewhere.log"))) == ""
    path = tmp_path / "logs" / "campaigns" / "d" / "t" / "a" / "seed1.log"
    path.parent.mkdir(parents=True)
    log = StepLog(str(path))
    assert pg.job_label(log) == " [campaigns/d/t/a/seed1]"
    log.progress_label = "campaigns/d/t/a/seed1/round2"  # a campaign's round, counted apart
    assert pg.job_label(log) == " [campaigns/d/t/a/seed1/round2]"


def test_is_interactive_and_durations():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    class Closed(io.StringIO):
        def isatty(self):
            raise ValueError("closed")

    assert is_interactive(Tty()) and not is_interactive(io.StringIO()) and not is_interactive(Closed())
    assert not is_interactive(object())
    assert [duration(s) for s in (0.4, 42, 185, 3720)] == ["0 s", "42 s", "3 min 05 s", "1 h 02 min"]


# ------------------------------------------------------------------------------------ the generators


def _server(delay_s=0.0, metrics=None):
    import time

    def reply(n, path, body, headers):
        if path.endswith("/metrics"):
            if metrics is None:
                return 404, {"error": "no"}, None
            metrics["prompt_tokens"] += 5000  # every read finds the server further on
            text = f"vllm:prompt_tokens_total {metrics['prompt_tokens']}\nvllm:generation_tokens_total 7\n"
            return 200, text.encode(), {"Content-Type": "text/plain"}
        time.sleep(delay_s)
        return 200, openai_body("Yes", usage=(9, 2)), None

    return StandIn(reply)


def test_the_openai_backend_logs_a_line_per_quarter_in_a_log_file(monkeypatch):
    monkeypatch.setattr(pg, "is_interactive", lambda stream=None: False)
    stand, logs = _server(), []
    try:
        gen = OpenAIGenerator(
            f"{stand.url}/v1", "m", "EMPTY", concurrency=4, timeout=10, max_retries=0, log=logs.append
        )
        out = gen.generate([make_request([{"role": "user", "content": f"q{i}"}], 2) for i in range(40)])
    finally:
        stand.close()
    assert len(out) == 40
    progress = [x for x in logs if x.startswith("  generated ")]
    assert counts(progress) == [10, 20, 30, 40]
    assert re.fullmatch(r"  generated 40/40 in \d+ s, [\d.]+ answer tokens/s", progress[-1])


def test_the_openai_backend_says_it_waits_on_a_terminal(monkeypatch):
    """No answer for a while: a waiting line with what the server has done meanwhile (its counters)."""
    monkeypatch.setattr(pg, "is_interactive", lambda stream=None: True)
    monkeypatch.setattr(pg, "HEARTBEAT_S", 0.5)
    stand, logs = _server(delay_s=2.5, metrics={"prompt_tokens": 0.0}), []
    try:
        gen = OpenAIGenerator(
            f"{stand.url}/v1", "m", "EMPTY", concurrency=None, timeout=10, max_retries=0, log=logs.append,
            metrics_url=f"{stand.url}/metrics",
        )  # fmt: skip
        gen.generate([make_request([{"role": "user", "content": f"q{i}"}], 2) for i in range(3)])
    finally:
        stand.close()
    waiting = [x for x in logs if "awaited" in x]
    assert waiting and waiting[0].startswith("  generated 0/3 after ")
    assert "the model server has read 5,000 prompt tokens" in waiting[0]
    assert [x for x in logs if x.startswith("  generated 3/3 in ")]


def test_the_transformers_backend_logs_through_progress(monkeypatch):
    monkeypatch.setattr(pg, "is_interactive", lambda stream=None: False)
    gen = TransformersGenerator.__new__(TransformersGenerator)  # no model: its batches are stubbed
    logs = []
    gen.batch_size, gen.log = 1, logs.append
    gen._batch = lambda reqs: [{"response_text": "x", "completion_tokens": 2} for _ in reqs]
    seen = []
    out = gen.generate(
        [make_request([{"role": "user", "content": f"q{i}"}], 4) for i in range(8)],
        on_result=lambda i, r: seen.append(i),
    )
    assert len(out) == 8 and sorted(seen) == list(range(8))
    assert counts(logs) == [2, 4, 6, 8]  # the old code: a line per batch, 8
