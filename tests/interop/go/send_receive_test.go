package interop

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Single sends and a MessageBatch, then a peek-lock receive that completes them all: afterwards the
// queue is empty.
func TestSendBatchAndComplete(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-send")
	ctx := ctxT(t)

	must(t, sender.SendMessage(ctx, &azservicebus.Message{
		MessageID:             ptr("single-1"),
		Body:                  []byte("hello from go"),
		Subject:               ptr("greeting"),
		ContentType:           ptr("text/plain"),
		CorrelationID:         ptr("corr-1"),
		ApplicationProperties: map[string]any{"kind": "x", "n": int64(42), "f": 1.5, "b": true},
	}, nil))

	batch, err := sender.NewMessageBatch(ctx, nil)
	must(t, err)
	for _, id := range []string{"batch-1", "batch-2", "batch-3"} {
		must(t, batch.AddMessage(textMessage(id, "in a batch"), nil))
	}
	if batch.NumMessages() != 3 {
		t.Fatalf("batch holds %d messages", batch.NumMessages())
	}
	must(t, sender.SendMessageBatch(ctx, batch, nil))

	receiver := newReceiver(t, client, "go-send", nil)
	got := receiveN(t, receiver, 4, 20*time.Second)
	equalStrings(t, "received", ids(got), []string{"single-1", "batch-1", "batch-2", "batch-3"})

	first := got[0]
	if string(first.Body) != "hello from go" || *first.Subject != "greeting" || *first.ContentType != "text/plain" ||
		*first.CorrelationID != "corr-1" {
		t.Fatalf("properties not intact: %+v", first)
	}
	if first.ApplicationProperties["kind"] != "x" || first.ApplicationProperties["n"] != int64(42) ||
		first.ApplicationProperties["f"] != 1.5 || first.ApplicationProperties["b"] != true {
		t.Fatalf("application properties not intact: %#v", first.ApplicationProperties)
	}
	// The Go SDK reports the AMQP header's delivery-count plus one (the .NET convention: the first
	// delivery is number 1), unlike the Python and JavaScript SDKs.
	if first.DeliveryCount != 1 || first.SequenceNumber == nil || first.EnqueuedTime == nil || first.LockedUntil == nil {
		t.Fatalf("broker properties missing: count %d seq %v enq %v locked %v",
			first.DeliveryCount, first.SequenceNumber, first.EnqueuedTime, first.LockedUntil)
	}
	for _, m := range got {
		must(t, receiver.CompleteMessage(ctxT(t), m, nil))
	}
	receiveNone(t, receiver, 2*time.Second)
}
