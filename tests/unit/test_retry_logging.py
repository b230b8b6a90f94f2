"""Failures a controller retries: expected ones (conflicts, objects gone, a member down) are one log line naming
their reason, unexpected ones keep their traceback."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest

from flotilla.client.errors import ApiException, ConnectionFailed, retry_reason
from flotilla.client.workqueue import WorkQueue, failure_log_level


def _wrapped_connection_failure() -> RuntimeError:
    try:
        try:
            raise ConnectionFailed("https://127.0.0.1:1/api: ClientConnectorError: refused")
        except ConnectionFailed as e:
            raise RuntimeError("cluster member1: cannot watch") from e
    except RuntimeError as e:
        return e


@pytest.mark.parametrize(("exc", "reason"), [
    (ApiException(409, message="the object has been modified"), "Conflict"),
    (ApiException(409, "AlreadyExists", "already exists"), "AlreadyExists"),
    (ApiException(404), "NotFound"),
    (ApiException(410), "Expired"),
    (ApiException(429), "TooManyRequests"),
    (ApiException(503), "ServiceUnavailable"),
    (ConnectionFailed("refused"), "ConnectionFailed"),
    (ConnectionFailed("timed out", reason="Timeout"), "Timeout"),
    (ConnectionRefusedError(111, "refused"), "ConnectionRefusedError"),
    (TimeoutError(), "Timeout"),
    (_wrapped_connection_failure(), "ConnectionFailed"),
    (ApiException(422, "Invalid", "spec.replicas: Invalid value"), None),
    (ApiException(500), None),
    (ValueError("bug"), None),
    (RuntimeError("no cause"), None),
])
def test_retry_reason_names_expected_transient_failures_only(exc: BaseException, reason: str | None) -> None:
    assert retry_reason(exc) == reason


def test_conflicts_are_debug_member_failures_info_and_the_rest_warnings() -> None:
    assert failure_log_level(ApiException(409)) == (logging.DEBUG, "Conflict")
    assert failure_log_level(ApiException(404)) == (logging.DEBUG, "NotFound")
    assert failure_log_level(_wrapped_connection_failure()) == (logging.INFO, "ConnectionFailed")
    assert failure_log_level(KeyError("x")) == (logging.WARNING, None)


async def _run_failing_once(exc: BaseException) -> None:
    q: WorkQueue[str] = WorkQueue("retrylog")
    calls: Counter[str] = Counter()
    done = asyncio.Event()

    async def handler(key: str) -> None:
        calls[key] += 1
        if calls[key] == 1:
            raise exc
        done.set()

    q.add("ns/name")
    runner = asyncio.create_task(q.run_workers(1, handler))
    await asyncio.wait_for(done.wait(), 5)
    q.shutdown()
    await asyncio.wait_for(runner, 5)


def _queue_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "flotilla.client.workqueue"]


@pytest.mark.parametrize(("exc", "level", "reason"), [
    (ApiException(409, message="the object has been modified"), logging.DEBUG, "Conflict"),
    (ApiException(404), logging.DEBUG, "NotFound"),
    (_wrapped_connection_failure(), logging.INFO, "ConnectionFailed"),
])
async def test_an_expected_retry_is_logged_as_one_line_with_its_reason(
        caplog: pytest.LogCaptureFixture, exc: BaseException, level: int, reason: str) -> None:
    caplog.set_level(logging.DEBUG, logger="flotilla.client.workqueue")
    await _run_failing_once(exc)
    [record] = _queue_records(caplog)
    assert record.levelno == level
    assert record.exc_info is None and record.exc_text is None
    message = record.getMessage()
    assert "\n" not in message and "Traceback" not in caplog.text
    assert f"will retry ({reason})" in message and "'ns/name'" in message and str(exc) in message


async def test_an_unexpected_failure_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="flotilla.client.workqueue")
    await _run_failing_once(ValueError("a bug in a controller"))
    [record] = _queue_records(caplog)
    assert record.levelno == logging.WARNING and record.exc_info is not None
    assert "Traceback" in caplog.text and "ValueError: a bug in a controller" in caplog.text
