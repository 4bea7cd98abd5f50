package interop

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// A queue created, read, updated, counted and deleted through the admin client; the runtime counts
// follow what the AMQP side does to it.
func TestAdminQueueLifecycleAndRuntimeCounts(t *testing.T) {
	adm := newAdminClient(t)
	ctx := ctxT(t)
	const name = "go-admin-queue"
	created, err := adm.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		LockDuration: ptr("PT45S"), MaxDeliveryCount: ptr(int32(4)),
	}})
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteQueue(ctxT(t), name, nil) })
	if created.LockDuration == nil || *created.LockDuration != "PT45S" || *created.MaxDeliveryCount != 4 {
		t.Fatalf("created %+v", created.QueueProperties)
	}
	got, err := adm.GetQueue(ctx, name, nil)
	must(t, err)
	if got == nil || *got.MaxDeliveryCount != 4 {
		t.Fatalf("get %+v", got)
	}
	props := got.QueueProperties
	props.MaxDeliveryCount = ptr(int32(6))
	updated, err := adm.UpdateQueue(ctx, name, props, nil)
	must(t, err)
	if *updated.MaxDeliveryCount != 6 {
		t.Fatalf("update kept MaxDeliveryCount %d", *updated.MaxDeliveryCount)
	}

	client := newClient(t)
	sender := newSender(t, client, name)
	for _, id := range []string{"q-1", "q-2", "q-3"} {
		must(t, sender.SendMessage(ctxT(t), textMessage(id, id), nil))
	}
	_, err = sender.ScheduleMessages(ctxT(t), []*azservicebus.Message{textMessage("q-later", "later")},
		time.Now().Add(time.Hour), nil)
	must(t, err)
	receiver := newReceiver(t, client, name, nil)
	first := receiveN(t, receiver, 1, 20*time.Second)
	must(t, receiver.DeadLetterMessage(ctxT(t), first[0], nil))

	runtime, err := adm.GetQueueRuntimeProperties(ctx, name, nil)
	must(t, err)
	if runtime.ActiveMessageCount != 2 || runtime.DeadLetterMessageCount != 1 || runtime.ScheduledMessageCount != 1 ||
		runtime.TotalMessageCount != 4 {
		t.Fatalf("runtime counts: active %d, dead-letter %d, scheduled %d, total %d", runtime.ActiveMessageCount,
			runtime.DeadLetterMessageCount, runtime.ScheduledMessageCount, runtime.TotalMessageCount)
	}

	var names []string
	pager := adm.NewListQueuesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		must(t, err)
		for _, q := range page.Queues {
			names = append(names, q.QueueName)
		}
	}
	if !contains(names, name) || !contains(names, "go-send") {
		t.Fatalf("list queues: %v", names)
	}

	ns, err := adm.GetNamespaceProperties(ctx, nil)
	must(t, err)
	if ns.Name == "" {
		t.Fatalf("namespace properties %+v", ns)
	}

	_, err = adm.DeleteQueue(ctx, name, nil)
	must(t, err)
	gone, err := adm.GetQueue(ctx, name, nil)
	if err != nil || gone != nil {
		t.Fatalf("GetQueue of a deleted queue: %+v, %v (the SDK returns nil, nil for 404)", gone, err)
	}
}

// A lock that ran out cannot settle the message: the SDK reports CodeLockLost, and the message is
// delivered again with its delivery count raised ("Message transfers, locks, and settlement").
func TestExpiredLockIsLockLost(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-short-lock").SendMessage(ctxT(t), textMessage("ll-1", "slow"), nil))
	receiver := newReceiver(t, client, "go-short-lock", nil)
	got := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"ll-1"})
	time.Sleep(time.Until(*got[0].LockedUntil) + 1500*time.Millisecond)

	err := receiver.CompleteMessage(ctxT(t), got[0], nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Fatalf("complete after the lock expired: %v", err)
	}
	again := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "redelivered", ids(again), []string{"ll-1"})
	if again[0].DeliveryCount != got[0].DeliveryCount+1 {
		t.Fatalf("delivery count %d after a lapsed lock (first %d)", again[0].DeliveryCount, got[0].DeliveryCount)
	}
	must(t, receiver.CompleteMessage(ctxT(t), again[0], nil))
}

// Abandoned MaxDeliveryCount times, a message goes to the dead-letter queue with the reason
// MaxDeliveryCountExceeded ("Overview of Service Bus dead-letter queues").
func TestMaxDeliveryCountDeadLetters(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-retry3").SendMessage(ctxT(t), textMessage("mx-1", "fails"), nil))
	receiver := newReceiver(t, client, "go-retry3", nil)
	for i := 1; i <= 3; i++ {
		got := receiveN(t, receiver, 1, 20*time.Second)
		equalStrings(t, "delivery", ids(got), []string{"mx-1"})
		if got[0].DeliveryCount != uint32(i) {
			t.Fatalf("delivery %d reports count %d", i, got[0].DeliveryCount)
		}
		must(t, receiver.AbandonMessage(ctxT(t), got[0], nil))
	}
	receiveNone(t, receiver, 2*time.Second)
	dlq := newReceiver(t, client, "go-retry3", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dead := receiveN(t, dlq, 1, 20*time.Second)
	equalStrings(t, "dead-lettered", ids(dead), []string{"mx-1"})
	if dead[0].DeadLetterReason == nil || *dead[0].DeadLetterReason != "MaxDeliveryCountExceeded" {
		t.Fatalf("reason %v", dead[0].DeadLetterReason)
	}
	must(t, dlq.CompleteMessage(ctxT(t), dead[0], nil))
}

// AMQP bodies other than one data section, sent with SendAMQPAnnotatedMessage, arrive as sent: an
// amqp-value, an amqp-sequence, several data sections; the header's TTL sets ExpiresAt.
func TestAMQPAnnotatedMessageBodies(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-amqp-bodies")
	ttl := uint64(10 * time.Minute / time.Millisecond)
	send := func(id string, body azservicebus.AMQPAnnotatedMessageBody) {
		must(t, sender.SendAMQPAnnotatedMessage(ctxT(t), &azservicebus.AMQPAnnotatedMessage{
			Body:       body,
			Header:     &azservicebus.AMQPAnnotatedMessageHeader{TTL: time.Duration(ttl) * time.Millisecond},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: id},
		}, nil))
	}
	send("value", azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"k": "v", "n": int64(3)}})
	send("sequence", azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a", int64(1)}, {true}}})
	send("data", azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("one"), []byte("two")}})

	receiver := newReceiver(t, client, "go-amqp-bodies", nil)
	got := receiveN(t, receiver, 3, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"value", "sequence", "data"})
	value, ok := got[0].RawAMQPMessage.Body.Value.(map[string]any)
	if !ok || value["k"] != "v" || value["n"] != int64(3) {
		t.Fatalf("amqp-value body %#v", got[0].RawAMQPMessage.Body.Value)
	}
	seq := got[1].RawAMQPMessage.Body.Sequence
	if len(seq) != 2 || len(seq[0]) != 2 || seq[0][0] != "a" || seq[0][1] != int64(1) || seq[1][0] != true {
		t.Fatalf("amqp-sequence body %#v", seq)
	}
	data := got[2].RawAMQPMessage.Body.Data
	if len(data) != 2 || string(data[0]) != "one" || string(data[1]) != "two" {
		t.Fatalf("data sections %q", data)
	}
	if got[0].TimeToLive == nil || *got[0].TimeToLive != 10*time.Minute || got[0].ExpiresAt == nil {
		t.Fatalf("TTL %v, expires %v", got[0].TimeToLive, got[0].ExpiresAt)
	}
	for _, m := range got {
		must(t, receiver.CompleteMessage(ctxT(t), m, nil))
	}
}

// Sessions with messages are listed by NewListSessionsForQueuePager ("get-message-sessions"); a
// session receiver in receive-and-delete mode takes its session's messages for good.
func TestListSessionsAndReceiveAndDeleteSession(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-list-sessions")
	for _, m := range []*azservicebus.Message{
		sessionMessage("l-1", "ls-a"), sessionMessage("l-2", "ls-b"), sessionMessage("l-3", "ls-b"),
	} {
		must(t, sender.SendMessage(ctxT(t), m, nil))
	}
	var listed []string
	pager := client.NewListSessionsForQueuePager("go-list-sessions", nil)
	for pager.More() {
		page, err := pager.NextPage(ctxT(t))
		must(t, err)
		listed = append(listed, page.Sessions...)
	}
	sort.Strings(listed)
	equalStrings(t, "listed sessions", listed, []string{"ls-a", "ls-b"})

	session, err := client.AcceptSessionForQueue(ctxT(t), "go-list-sessions", "ls-b",
		&azservicebus.SessionReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	must(t, err)
	t.Cleanup(func() { _ = session.Close(ctxT(t)) })
	got := receiveN(t, session, 2, 20*time.Second)
	equalStrings(t, "received from ls-b", ids(got), []string{"l-2", "l-3"})
	must(t, session.Close(ctxT(t)))

	again, err := client.AcceptSessionForQueue(ctxT(t), "go-list-sessions", "ls-b", nil)
	must(t, err)
	t.Cleanup(func() { _ = again.Close(ctxT(t)) })
	receiveNone(t, again, 2*time.Second)
	must(t, again.Close(ctxT(t)))

	a, err := client.AcceptSessionForQueue(ctxT(t), "go-list-sessions", "ls-a", nil)
	must(t, err)
	t.Cleanup(func() { _ = a.Close(ctxT(t)) })
	left := receiveN(t, a, 1, 20*time.Second)
	equalStrings(t, "ls-a", ids(left), []string{"l-1"})
	must(t, a.CompleteMessage(ctxT(t), left[0], nil))
}

// The batch's size limit comes from the sender link's attach (max-message-size of a 64 KB queue):
// AddMessage refuses what does not fit with ErrMessageTooLarge, and a single message over the limit is
// refused before it is sent.
func TestMessageSizeLimit(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-small")
	batch, err := sender.NewMessageBatch(ctxT(t), nil)
	must(t, err)
	big := strings.Repeat("x", 40*1024)
	must(t, batch.AddMessage(textMessage("fits", big), nil))
	err = batch.AddMessage(textMessage("overflows", big), nil)
	if !errors.Is(err, azservicebus.ErrMessageTooLarge) {
		t.Fatalf("second 40 KB message in a 64 KB batch: %v", err)
	}
	must(t, sender.SendMessageBatch(ctxT(t), batch, nil))

	// go-amqp checks a transfer against the max-message-size of the broker's attach (AMQP 1.0 part 2,
	// 2.7.3) before sending it, so the refusal is the client's own and nothing reaches the queue.
	err = sender.SendMessage(ctxT(t), textMessage("too-big", strings.Repeat("y", 100*1024)), nil)
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("100 KB message to a 64 KB queue: %v", err)
	}
	receiver := newReceiver(t, client, "go-small", &azservicebus.ReceiverOptions{
		ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete,
	})
	got := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"fits"})
	receiveNone(t, receiver, time.Second)
}

// A message whose lock the receiver still holds when the receiver closes stays locked until the lock
// lapses (3 s on go-close), as on Service Bus; then the next receiver gets it, the delivery counted
// (docs/emulator.md, "Where the docs are terse").
func TestClosingAReceiverLeavesItsMessagesLockedUntilTheLockLapses(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-close").SendMessage(ctxT(t), textMessage("cl-1", "unsettled"), nil))
	first, err := client.NewReceiverForQueue("go-close", nil)
	must(t, err)
	got := receiveN(t, first, 1, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"cl-1"})
	must(t, first.Close(ctxT(t)))

	second := newReceiver(t, client, "go-close", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	again, err := second.ReceiveMessages(ctx, 1, nil)
	must(t, err)
	equalStrings(t, "after the lock lapsed", ids(again), []string{"cl-1"})
	if again[0].DeliveryCount != got[0].DeliveryCount+1 {
		t.Fatalf("delivery count %d after a lapsed lock (first %d)", again[0].DeliveryCount, got[0].DeliveryCount)
	}
	must(t, second.CompleteMessage(ctxT(t), again[0], nil))
}

// A subscription has a dead-letter queue of its own.
func TestSubscriptionDeadLetterQueue(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-events").SendMessage(ctxT(t), textMessage("ev-1", "event"), nil))
	receiver, err := client.NewReceiverForSubscription("go-events", "all", nil)
	must(t, err)
	t.Cleanup(func() { _ = receiver.Close(ctxT(t)) })
	got := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"ev-1"})
	must(t, receiver.DeadLetterMessage(ctxT(t), got[0], &azservicebus.DeadLetterOptions{Reason: ptr("Nope")}))
	dlq, err := client.NewReceiverForSubscription("go-events", "all",
		&azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	must(t, err)
	t.Cleanup(func() { _ = dlq.Close(ctxT(t)) })
	dead := receiveN(t, dlq, 1, 20*time.Second)
	equalStrings(t, "dead-lettered", ids(dead), []string{"ev-1"})
	if *dead[0].DeadLetterReason != "Nope" {
		t.Fatalf("reason %v", *dead[0].DeadLetterReason)
	}
	must(t, dlq.CompleteMessage(ctxT(t), dead[0], nil))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
