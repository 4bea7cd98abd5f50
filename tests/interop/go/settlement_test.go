package interop

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Abandon puts the message back with its delivery count raised and the properties to modify applied
// ("Message transfers, locks, and settlement": abandon).
func TestAbandonRedeliversWithModifiedProperties(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-settle").SendMessage(ctxT(t), textMessage("ab-1", "again"), nil))
	receiver := newReceiver(t, client, "go-settle", nil)

	first := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "first delivery", ids(first), []string{"ab-1"})
	must(t, receiver.AbandonMessage(ctxT(t), first[0], &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"attempt": "one"},
	}))

	again := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "redelivery", ids(again), []string{"ab-1"})
	if again[0].DeliveryCount != first[0].DeliveryCount+1 {
		t.Fatalf("delivery count %d after abandon, first was %d", again[0].DeliveryCount, first[0].DeliveryCount)
	}
	if again[0].ApplicationProperties["attempt"] != "one" {
		t.Fatalf("properties to modify not applied: %#v", again[0].ApplicationProperties)
	}
	if again[0].LockToken == first[0].LockToken {
		t.Fatalf("redelivery reuses the lock token %x", again[0].LockToken)
	}
	must(t, receiver.CompleteMessage(ctxT(t), again[0], nil))
}

// Defer takes the message out of normal delivery; ReceiveDeferredMessages fetches it by sequence
// number ("Message deferral"), and a peek shows it in the deferred state.
func TestDeferAndReceiveDeferred(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-defer")
	must(t, sender.SendMessage(ctxT(t), textMessage("df-1", "later"), nil))
	must(t, sender.SendMessage(ctxT(t), textMessage("df-2", "now"), nil))
	receiver := newReceiver(t, client, "go-defer", nil)

	got := receiveN(t, receiver, 2, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"df-1", "df-2"})
	must(t, receiver.DeferMessage(ctxT(t), got[0], nil))
	must(t, receiver.CompleteMessage(ctxT(t), got[1], nil))
	receiveNone(t, receiver, 2*time.Second)

	peeked, err := receiver.PeekMessages(ctxT(t), 10, nil)
	must(t, err)
	if len(peeked) != 1 || peeked[0].MessageID != "df-1" || peeked[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("peek after defer: %d messages, first %+v", len(peeked), peeked)
	}

	deferred, err := receiver.ReceiveDeferredMessages(ctxT(t), []int64{*got[0].SequenceNumber}, nil)
	must(t, err)
	equalStrings(t, "deferred", ids(deferred), []string{"df-1"})
	if string(deferred[0].Body) != "later" {
		t.Fatalf("deferred body %q", deferred[0].Body)
	}
	must(t, receiver.CompleteMessage(ctxT(t), deferred[0], nil))
	peeked, err = receiver.PeekMessages(ctxT(t), 10, nil)
	must(t, err)
	if len(peeked) != 0 {
		t.Fatalf("queue not empty after completing the deferred message: %v", ids(peeked))
	}
}

// Dead-lettering with a reason and description moves the message to the queue's dead-letter
// subqueue, where the reason and description come back as properties ("Overview of Service Bus
// dead-letter queues").
func TestDeadLetterWithReason(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-dlq").SendMessage(ctxT(t), textMessage("dl-1", "poison"), nil))
	receiver := newReceiver(t, client, "go-dlq", nil)

	got := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"dl-1"})
	must(t, receiver.DeadLetterMessage(ctxT(t), got[0], &azservicebus.DeadLetterOptions{
		Reason: ptr("BadFormat"), ErrorDescription: ptr("not a number"),
	}))
	receiveNone(t, receiver, 2*time.Second)

	dlq := newReceiver(t, client, "go-dlq", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dead := receiveN(t, dlq, 1, 20*time.Second)
	equalStrings(t, "dead-lettered", ids(dead), []string{"dl-1"})
	if dead[0].DeadLetterReason == nil || *dead[0].DeadLetterReason != "BadFormat" ||
		dead[0].DeadLetterErrorDescription == nil || *dead[0].DeadLetterErrorDescription != "not a number" {
		t.Fatalf("reason %v, description %v", dead[0].DeadLetterReason, dead[0].DeadLetterErrorDescription)
	}
	if string(dead[0].Body) != "poison" {
		t.Fatalf("body %q", dead[0].Body)
	}
	must(t, dlq.CompleteMessage(ctxT(t), dead[0], nil))
}

// Receive-and-delete: the messages are gone once delivered, with no lock token to settle.
func TestReceiveAndDelete(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-rad")
	for _, id := range []string{"rd-1", "rd-2", "rd-3"} {
		must(t, sender.SendMessage(ctxT(t), textMessage(id, id), nil))
	}
	receiver := newReceiver(t, client, "go-rad", &azservicebus.ReceiverOptions{
		ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete,
	})
	got := receiveN(t, receiver, 3, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"rd-1", "rd-2", "rd-3"})
	if got[0].LockedUntil != nil {
		t.Fatalf("a receive-and-delete message carries a lock until %v", got[0].LockedUntil)
	}
	must(t, receiver.Close(ctxT(t)))

	again := newReceiver(t, client, "go-rad", nil)
	receiveNone(t, again, 2*time.Second)
}

// Peek reads without locking, from a sequence number on, and moves on through the queue.
func TestPeek(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-peek")
	for _, id := range []string{"pk-1", "pk-2", "pk-3"} {
		must(t, sender.SendMessage(ctxT(t), textMessage(id, id), nil))
	}
	receiver := newReceiver(t, client, "go-peek", nil)

	firstTwo, err := receiver.PeekMessages(ctxT(t), 2, nil)
	must(t, err)
	equalStrings(t, "first peek", ids(firstTwo), []string{"pk-1", "pk-2"})
	rest, err := receiver.PeekMessages(ctxT(t), 10, nil)
	must(t, err)
	equalStrings(t, "peek continues", ids(rest), []string{"pk-3"})
	from, err := receiver.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{
		FromSequenceNumber: firstTwo[1].SequenceNumber,
	})
	must(t, err)
	equalStrings(t, "peek from a sequence number", ids(from), []string{"pk-2", "pk-3"})
	if firstTwo[0].LockedUntil != nil {
		t.Fatalf("a peeked message carries a lock")
	}

	// Peeking locked nothing: all three are still there to receive.
	got := receiveN(t, receiver, 3, 20*time.Second)
	equalStrings(t, "received after peek", ids(got), []string{"pk-1", "pk-2", "pk-3"})
	for _, m := range got {
		must(t, receiver.CompleteMessage(ctxT(t), m, nil))
	}
}

// Scheduled messages: one cancelled before it is due never arrives, the other arrives when due
// ("Scheduled messages").
func TestScheduleAndCancel(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-sched")
	due := time.Now().Add(3 * time.Second)
	seqs, err := sender.ScheduleMessages(ctxT(t), []*azservicebus.Message{
		textMessage("sc-keep", "keep"), textMessage("sc-cancel", "cancel"),
	}, due, nil)
	must(t, err)
	if len(seqs) != 2 {
		t.Fatalf("sequence numbers %v", seqs)
	}
	receiver := newReceiver(t, client, "go-sched", nil)
	peeked, err := receiver.PeekMessages(ctxT(t), 10, nil)
	must(t, err)
	if len(peeked) != 2 || peeked[0].State != azservicebus.MessageStateScheduled || peeked[0].ScheduledEnqueueTime == nil {
		t.Fatalf("peek of scheduled messages: %+v", peeked)
	}
	must(t, sender.CancelScheduledMessages(ctxT(t), []int64{seqs[1]}, nil))

	got := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "delivered when due", ids(got), []string{"sc-keep"})
	if time.Now().Before(due.Add(-500 * time.Millisecond)) {
		t.Fatalf("a message scheduled for %v arrived at %v", due, time.Now())
	}
	must(t, receiver.CompleteMessage(ctxT(t), got[0], nil))
	receiveNone(t, receiver, 2*time.Second)
}
