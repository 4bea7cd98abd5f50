package interop

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/go-amqp"
)

// Behaviours of Service Bus that Microsoft's own tests of this SDK (azservicebus v1.11.0, its *_test.go
// files) expect; each test names the one it follows.

var (
	endpointRe = regexp.MustCompile(`(?i)Endpoint=sb://([^;/]*)`)
	keyNameRe  = regexp.MustCompile(`(?i)SharedAccessKeyName=([^;]*)`)
	keyRe      = regexp.MustCompile(`(?i)SharedAccessKey=([^;]*)`)
)

func connField(t *testing.T, re *regexp.Regexp, cs string) string {
	t.Helper()
	m := re.FindStringSubmatch(cs)
	if m == nil {
		t.Fatalf("%s not in the connection string", re)
	}
	return m[1]
}

// sasConnectionString is what the SDK's internal sas.CreateConnectionStringWithSASUsingExpiry makes of
// a key connection string: a token whose resource is the bare namespace host (host[:port], no scheme,
// lower-case and query-escaped as the SDK's Signer writes it), embedded as SharedAccessSignature.
func sasConnectionString(t *testing.T, cs string, expiry time.Time) string {
	t.Helper()
	host := connField(t, endpointRe, cs)
	audience := strings.ToLower(url.QueryEscape(host))
	se := fmt.Sprintf("%d", expiry.Unix())
	mac := hmac.New(sha256.New, []byte(connField(t, keyRe, cs)))
	mac.Write([]byte(audience + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	token := fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", audience, sig, se, connField(t, keyNameRe, cs))
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessSignature=%s;UseDevelopmentEmulator=true", host, token)
}

// A SAS token whose resource is the bare namespace host is a token for the whole namespace, on the
// management endpoint (Atom) and on $cbs: client_test.go TestNewClientUsingSharedAccessSignature (an
// admin client and a Client from the same SharedAccessSignature connection string).
func TestSharedAccessSignatureForTheNamespaceHost(t *testing.T) {
	expiry := time.Now().Add(time.Hour)
	sasCS := sasConnectionString(t, env(t, "SB_CONNECTION_STRING"), expiry)
	if !strings.Contains(sasCS, "SharedAccessSignature=SharedAccessSignature") {
		t.Fatalf("no embedded SAS: %s", sasCS)
	}

	adminCS := sasConnectionString(t, adminConnectionString(t), expiry)
	adminClient := newAdminClientFrom(t, adminCS)
	props, err := adminClient.GetQueue(ctxT(t), "go-sas", nil)
	must(t, err)
	if props == nil || props.QueueName != "go-sas" {
		t.Fatalf("GetQueue with the namespace SAS: %+v", props)
	}

	client, err := azservicebus.NewClientFromConnectionString(sasCS, nil)
	must(t, err)
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	must(t, newSender(t, client, "go-sas").SendMessage(ctxT(t), textMessage("sas-1", "hello world"), nil))
	receiver := newReceiver(t, client, "go-sas", &azservicebus.ReceiverOptions{
		ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete,
	})
	got := receiveN(t, receiver, 1, 20*time.Second)
	if len(got) != 1 || string(got[0].Body) != "hello world" {
		t.Fatalf("received %v", ids(got))
	}
	// A receive-and-delete delivery has no lock: no lock token from its (empty) delivery tag.
	if got[0].LockToken != [16]byte{} || len(got[0].RawAMQPMessage.DeliveryTag) != 0 {
		t.Fatalf("receive-and-delete delivery has tag %x, lock token %x", got[0].RawAMQPMessage.DeliveryTag, got[0].LockToken)
	}
}

// An expired token is refused with Service Bus's text: client_test.go TestClientUnauthorizedCreds
// ("Expired SAS") and receiver_test.go's twin, for a sender and a receiver.
func TestExpiredSharedAccessSignature(t *testing.T) {
	expiredCS := sasConnectionString(t, env(t, "SB_CONNECTION_STRING"), time.Now().Add(-10*time.Minute))
	client, err := azservicebus.NewClientFromConnectionString(expiredCS, nil)
	must(t, err)
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	const want = "rpc: failed, status code 401 and description: ExpiredToken: The token is expired. Expiration time:"

	sender, err := client.NewSender("go-send", nil)
	must(t, err)
	t.Cleanup(func() { _ = sender.Close(context.Background()) })
	err = sender.SendMessage(ctxT(t), textMessage("expired", "x"), nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess || !strings.Contains(err.Error(), want) {
		t.Fatalf("send with an expired token: %v", err)
	}

	receiver := newReceiver(t, client, "go-send", nil)
	messages, err := receiver.ReceiveMessages(ctxT(t), 1, nil)
	sbErr = nil
	if len(messages) != 0 || !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess ||
		!strings.Contains(err.Error(), want) {
		t.Fatalf("receive with an expired token: %d messages, %v", len(messages), err)
	}
}

// The dead-letter queue keeps the delivery count a message had when it was dead-lettered, and its own
// receives do not count: messageSettler_test.go TestMessageSettlementUsingReceiver (1, abandon, 2,
// dead-letter; 2 in the dead-letter queue, abandon there, still 2).
func TestDeadLetterQueueKeepsTheDeliveryCount(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-dlq-count").SendMessage(ctxT(t), textMessage("dc-1", "hello"), nil))
	receiver := newReceiver(t, client, "go-dlq-count", nil)
	dlq := newReceiver(t, client, "go-dlq-count", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	count := func(what string, m *azservicebus.ReceivedMessage, want uint32) {
		t.Helper()
		if m.DeliveryCount != want {
			t.Fatalf("%s: delivery count %d, want %d", what, m.DeliveryCount, want)
		}
	}

	first := receiveN(t, receiver, 1, 20*time.Second)
	equalStrings(t, "first", ids(first), []string{"dc-1"})
	count("first receive", first[0], 1)
	must(t, receiver.AbandonMessage(ctxT(t), first[0], &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"hello": "world"},
	}))
	second := receiveN(t, receiver, 1, 20*time.Second)
	count("after abandon", second[0], 2)
	must(t, receiver.DeadLetterMessage(ctxT(t), second[0], &azservicebus.DeadLetterOptions{
		ErrorDescription: ptr("the error description"), Reason: ptr("the error reason"),
	}))

	dead := receiveN(t, dlq, 1, 20*time.Second)
	equalStrings(t, "dead-lettered", ids(dead), []string{"dc-1"})
	count("dead-letter queue", dead[0], 2)
	if *dead[0].DeadLetterReason != "the error reason" || *dead[0].DeadLetterErrorDescription != "the error description" {
		t.Fatalf("reason %q, description %q", *dead[0].DeadLetterReason, *dead[0].DeadLetterErrorDescription)
	}
	must(t, dlq.AbandonMessage(ctxT(t), dead[0], &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"hello": "world"},
	}))
	again := receiveN(t, dlq, 1, 20*time.Second)
	count("dead-letter queue after abandon", again[0], 2)
	if again[0].ApplicationProperties["hello"] != "world" {
		t.Fatalf("properties %v", again[0].ApplicationProperties)
	}
	must(t, dlq.CompleteMessage(ctxT(t), again[0], nil))
}

// Delivery annotations, message annotations and the footer the sender set reach the receiver, the
// delivery annotations beside x-opt-lock-token: sender_test.go
// TestSender_SendAMQPMessageWithMultipleByteSlicesInData.
func TestSenderAnnotationsAndFooterReachTheReceiver(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-annotations")
	must(t, sender.SendAMQPAnnotatedMessage(ctxT(t), &azservicebus.AMQPAnnotatedMessage{
		DeliveryAnnotations: map[any]any{"x-opt-delivery-annotation-test": "test-value"},
		MessageAnnotations:  map[any]any{"x-opt-message-annotation-test": "test-value"},
		Footer:              map[any]any{"x-opt-footer-test": "footer-value"},
		Header:              &azservicebus.AMQPAnnotatedMessageHeader{Priority: 100, Durable: true},
		Body: azservicebus.AMQPAnnotatedMessageBody{
			Data: [][]byte{[]byte("Hello World"), []byte("And another message!")},
		},
		ApplicationProperties: map[string]any{"hello": "world"},
	}, nil))

	receiver := newReceiver(t, client, "go-annotations", nil)
	got := receiveN(t, receiver, 1, 20*time.Second)
	if len(got) != 1 {
		t.Fatal("no message")
	}
	m := got[0].RawAMQPMessage
	if len(m.DeliveryTag) == 0 || got[0].Body != nil {
		t.Fatalf("delivery tag %x, body %q", m.DeliveryTag, got[0].Body)
	}
	wantDelivery := map[any]any{
		"x-opt-delivery-annotation-test": "test-value",
		"x-opt-lock-token":               amqp.UUID(got[0].LockToken),
	}
	if fmt.Sprint(m.DeliveryAnnotations) != fmt.Sprint(wantDelivery) {
		t.Fatalf("delivery annotations %v, want %v", m.DeliveryAnnotations, wantDelivery)
	}
	keys := []string{"x-opt-message-annotation-test", "x-opt-enqueued-time", "x-opt-sequence-number", "x-opt-locked-until"}
	if len(m.MessageAnnotations) != len(keys) || m.MessageAnnotations["x-opt-message-annotation-test"] != "test-value" {
		t.Fatalf("message annotations %v", m.MessageAnnotations)
	}
	for _, key := range keys {
		if _, ok := m.MessageAnnotations[key]; !ok {
			t.Fatalf("message annotations %v lack %s", m.MessageAnnotations, key)
		}
	}
	if m.Footer["x-opt-footer-test"] != "footer-value" || len(m.Footer) != 1 {
		t.Fatalf("footer %v", m.Footer)
	}
	if m.Header == nil || m.Header.Priority != 100 || !m.Header.Durable {
		t.Fatalf("header %+v", m.Header)
	}
	if len(m.Body.Data) != 2 || string(m.Body.Data[1]) != "And another message!" || m.ApplicationProperties["hello"] != "world" {
		t.Fatalf("body %q, application properties %v", m.Body.Data, m.ApplicationProperties)
	}
	must(t, receiver.CompleteMessage(ctxT(t), got[0], nil))
}

// Session state set to nil (an empty binary on the wire) reads back as nil, as it does before any state
// is set: session_receiver_test.go TestSessionReceiver_acceptSession ("sanity check that we can clear
// out session state as well").
func TestEmptySessionStateReadsBackAsNil(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-session-state").SendMessage(ctxT(t), sessionMessage("st-1", "session-1"), nil))
	receiver, err := client.AcceptSessionForQueue(ctxT(t), "go-session-state", "session-1", nil)
	must(t, err)
	t.Cleanup(func() { _ = receiver.Close(context.Background()) })

	state, err := receiver.GetSessionState(ctxT(t), nil)
	must(t, err)
	if state != nil {
		t.Fatalf("new session's state %q", state)
	}
	must(t, receiver.SetSessionState(ctxT(t), []byte("hello"), nil))
	state, err = receiver.GetSessionState(ctxT(t), nil)
	must(t, err)
	if string(state) != "hello" {
		t.Fatalf("state %q", state)
	}
	must(t, receiver.SetSessionState(ctxT(t), nil, nil))
	state, err = receiver.GetSessionState(ctxT(t), nil)
	must(t, err)
	if state != nil {
		t.Fatalf("cleared state reads back as %#v, want nil", state)
	}
	must(t, receiver.SetSessionState(ctxT(t), []byte{}, nil))
	state, err = receiver.GetSessionState(ctxT(t), nil)
	must(t, err)
	if state != nil {
		t.Fatalf("empty state reads back as %#v, want nil", state)
	}
}

// One $cbs link pair per connection: a second $cbs sender (or receiver) is refused with
// amqp:not-allowed, which the SDK's cbs.go NegotiateClaim turns into a connection reset
// (internal/amqpLinks_test.go TestAMQPLinksCBSLinkStillOpen leaves a $cbs sender open and expects a new
// connection). Once the first link is closed, a new one attaches.
func TestSecondCbsLinkIsNotAllowed(t *testing.T) {
	ctx := ctxT(t)
	conn, err := amqp.Dial(ctx, "amqp://"+connField(t, endpointRe, env(t, "SB_CONNECTION_STRING")),
		&amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	must(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	session, err := conn.NewSession(ctx, nil)
	must(t, err)

	first, err := session.NewSender(ctx, "$cbs", nil)
	must(t, err)
	var amqpErr *amqp.Error
	if _, err := session.NewSender(ctx, "$cbs", nil); !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotAllowed {
		t.Fatalf("second $cbs sender: %v", err)
	}
	firstReceiver, err := session.NewReceiver(ctx, "$cbs", nil)
	must(t, err)
	amqpErr = nil
	if _, err := session.NewReceiver(ctx, "$cbs", nil); !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotAllowed {
		t.Fatalf("second $cbs receiver: %v", err)
	}

	must(t, first.Close(ctx))
	must(t, firstReceiver.Close(ctx))
	again, err := session.NewSender(ctx, "$cbs", nil)
	must(t, err)
	must(t, again.Close(ctx))
}

// ForwardTo and ForwardDeadLetteredMessagesTo come back in the form they were given, a full https:// or
// sb:// URL included, and the queue forwards: admin_client_test.go TestAdminClient_Queue_Forwarding
// (https://<endpoint>/<queue>, create and get equal, a sent message arrives in the target) and
// admin/admin_client_test.go TestAdminClient_Forwarding (sb://<endpoint>/<queue> on a subscription).
func TestForwardToComesBackAsGiven(t *testing.T) {
	adm := newAdminClient(t)
	ctx := ctxT(t)
	suffix := fmt.Sprintf("%X", time.Now().UnixNano())
	target, source := "go-fwd-to-"+suffix, "go-fwd-from-"+suffix
	_, err := adm.CreateQueue(ctx, target, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteQueue(context.Background(), target, nil) })

	host := connField(t, endpointRe, adminConnectionString(t))
	formatted := fmt.Sprintf("https://%s/%s", host, target)
	created, err := adm.CreateQueue(ctx, source, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		ForwardTo: &formatted, ForwardDeadLetteredMessagesTo: &formatted,
	}})
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteQueue(context.Background(), source, nil) })
	if *created.ForwardTo != formatted || *created.ForwardDeadLetteredMessagesTo != formatted {
		t.Fatalf("created with ForwardTo %q, ForwardDeadLetteredMessagesTo %q; want %q", *created.ForwardTo,
			*created.ForwardDeadLetteredMessagesTo, formatted)
	}
	got, err := adm.GetQueue(ctx, source, nil)
	must(t, err)
	if *got.ForwardTo != formatted || *got.ForwardDeadLetteredMessagesTo != formatted {
		t.Fatalf("GetQueue: ForwardTo %q, ForwardDeadLetteredMessagesTo %q", *got.ForwardTo, *got.ForwardDeadLetteredMessagesTo)
	}

	sbForm := fmt.Sprintf("sb://%s/%s", host, target)
	_, err = adm.CreateSubscription(ctx, "go-events", "fwd-"+suffix, &admin.CreateSubscriptionOptions{
		Properties: &admin.SubscriptionProperties{ForwardTo: &sbForm, ForwardDeadLetteredMessagesTo: &sbForm},
	})
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteSubscription(context.Background(), "go-events", "fwd-"+suffix, nil) })
	sub, err := adm.GetSubscription(ctx, "go-events", "fwd-"+suffix, nil)
	must(t, err)
	if *sub.ForwardTo != sbForm || *sub.ForwardDeadLetteredMessagesTo != sbForm {
		t.Fatalf("GetSubscription: ForwardTo %q, ForwardDeadLetteredMessagesTo %q", *sub.ForwardTo, *sub.ForwardDeadLetteredMessagesTo)
	}

	client := newClient(t)
	must(t, newSender(t, client, source).SendMessage(ctx, textMessage("fwd-1", "this message will be auto-forwarded"), nil))
	forwarded := receiveN(t, newReceiver(t, client, target, nil), 1, 20*time.Second)
	if len(forwarded) != 1 || string(forwarded[0].Body) != "this message will be auto-forwarded" {
		t.Fatalf("forwarded %v", ids(forwarded))
	}
}
