"""One test's outcome and the reasons a test does not apply to an emulator."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Outcome:
    suite: str        # "go" or "python"
    group: str        # Go package or Python test file
    name: str
    result: str       # passed, failed, skipped, or "n/a" once classified
    detail: str = ""
    reason: str = ""


# (suite, regular expression over "group::name" or the failure text, reason). A test lands here only
# with a reason that holds for every service an emulator can be: it needs Entra ID (the emulator checks
# shared access signatures only), a Premium namespace, or it fails against any service (evidence given).
NOT_APPLICABLE: list[tuple[str, str, str, str]] = [
    ("go", "detail", r"DefaultAzureCredential: failed to acquire a token",
     "Entra ID: the test signs in with azidentity (DefaultAzureCredential); the emulator takes SAS only"),
    ("go", "name", r"Premium", "Premium namespace (large messages, Premium-only settings)"),
    ("python", "name", r"::test_pyamqp_copies_are_byte_identical\[",
     "needs no service and cannot pass from the sdist: it compares the SDK's vendored _pyamqp with "
     "azure-eventhub's copy, found by walking up to the azure-sdk-for-python repository's sdk/ folder "
     "(tests/unittests/test_pyamqp_decode.py, _repo_root); the sdist holds neither (its own assertion: "
     "'could not locate the repo root (no ancestor contains sdk/)')"),
    ("python", "name", r"::test_(async_)?next_available_session_timeout_value\[",
     "fails against any service with the SDK it ships in: it expects receive_messages(max_wait_time=5) on "
     "a NEXT_AVAILABLE_SESSION receiver made with max_wait_time=70 to wait more than 65 s for a session, "
     "but azure-servicebus 7.15.0 bounds the link's opening by the call's own wait "
     "(_servicebus_receiver.py _receive, and aio/_servicebus_receiver_async.py _receive for the async twin: "
     "self._open(get_attempt_timeout(wait_time, try_timeout)); _open "
     "raises OperationTimeoutError 'Timed out waiting for the AMQP link to open.' at that deadline, "
     "_common/utils.py check_link_ready_deadline), so it gives up after 5 s whatever the service does. "
     "The emulator meanwhile holds the attach for the com.microsoft:timeout the SDK sent (69 s)"),
    ("python", "name", r"::test_(async_)?queue_operation_negative\[",
     "fails against any service with the SDK it ships in: the test replaces ReceiveClient.settle_messages "
     "with _hack_amqp_message_complete(cls, _, _unused, settlement), and azure-servicebus 7.15.0 calls "
     "settle_messages with keyword arguments that signature lacks (_transport/_pyamqp_transport.py "
     "settle_message_via_receiver_link: await_outcome=..., outcome_timeout=...), so the test's own "
     "function raises TypeError ('got an unexpected keyword argument 'await_outcome'') before anything "
     "reaches the service"),
    ("go", "name", r"::TestReceiveWithDifferentWaitTime$",
     "measures the network, not the service: it asserts that ReceiveMessages(1000) returns fewer messages "
     "with the default TimeAfterFirstMessage (20 ms) than with 20 s, which holds only while the 1,000 "
     "messages of 1 KB cannot all arrive within 20 ms of the first (about 55 MB/s on one link). Over "
     "loopback they do: the test's own log shows 1000 messages in all three calls (default, 0 s, 20 s). "
     "The SDK's receive loop (receiver.go fetchMessages) only waits and counts, it sends nothing the "
     "service could answer differently; Azure/azure-sdk-for-go issue 19172 and pull request 22154 (which "
     "added the option and this test) describe the 20 ms window as returning partial batches from "
     "Service Bus over the network"),
]


def classify(outcome: Outcome) -> Outcome:
    if outcome.result not in ("failed", "skipped"):
        return outcome
    for suite, field, pattern, reason in NOT_APPLICABLE:
        if suite != outcome.suite:
            continue
        text = outcome.detail if field == "detail" else f"{outcome.group}::{outcome.name}"
        if re.search(pattern, text):
            outcome.result, outcome.reason = "n/a", reason
            return outcome
    return outcome
