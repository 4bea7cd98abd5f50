package interop

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// ReceiveMessages hands back at most maxMessages per call and what is available shortly after the
// first message: ten messages come in calls of at most four, all in order, none twice.
func TestReceiveMessagesBatching(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-batching")
	batch, err := sender.NewMessageBatch(ctxT(t), nil)
	must(t, err)
	var want []string
	for i := 0; i < 10; i++ {
		id := "bt-" + string(rune('a'+i))
		want = append(want, id)
		must(t, batch.AddMessage(textMessage(id, id), nil))
	}
	must(t, sender.SendMessageBatch(ctxT(t), batch, nil))

	receiver := newReceiver(t, client, "go-batching", nil)
	var got []*azservicebus.ReceivedMessage
	calls := 0
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 10 && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		part, err := receiver.ReceiveMessages(ctx, 4, &azservicebus.ReceiveMessagesOptions{
			TimeAfterFirstMessage: time.Second,
		})
		cancel()
		must(t, err)
		calls++
		if len(part) > 4 {
			t.Fatalf("call %d returned %d messages, max 4", calls, len(part))
		}
		for _, m := range part {
			must(t, receiver.CompleteMessage(ctxT(t), m, nil))
		}
		got = append(got, part...)
	}
	equalStrings(t, "received", ids(got), want)
	if calls < 3 {
		t.Fatalf("ten messages in %d calls of at most four", calls)
	}
	receiveNone(t, receiver, 2*time.Second)
}

// RenewMessageLock moves LockedUntil forward; a lock held past the queue's LockDuration by renewal
// can still be completed. The queue's LockDuration is 5 s, so a message held for 7 s with renewals
// every 2 s would have been redelivered without them.
func TestRenewMessageLock(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-lock").SendMessage(ctxT(t), textMessage("lk-1", "hold"), nil))
	receiver := newReceiver(t, client, "go-lock", nil)
	got := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"lk-1"})
	msg := got[0]
	firstLock := *msg.LockedUntil

	held := time.Now().Add(7 * time.Second)
	for time.Now().Before(held) {
		time.Sleep(2 * time.Second)
		before := *msg.LockedUntil
		must(t, receiver.RenewMessageLock(ctxT(t), msg, nil))
		if !msg.LockedUntil.After(before) {
			t.Fatalf("renewal did not move the lock: %v then %v", before, *msg.LockedUntil)
		}
	}
	if !msg.LockedUntil.After(firstLock.Add(time.Second)) {
		t.Fatalf("lock until %v, first %v", *msg.LockedUntil, firstLock)
	}
	must(t, receiver.CompleteMessage(ctxT(t), msg, nil))
	receiveNone(t, receiver, 2*time.Second)
}
