package interop

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

func sessionMessage(id, session string) *azservicebus.Message {
	return &azservicebus.Message{MessageID: &id, SessionID: &session, Body: []byte(id)}
}

// AcceptSessionForQueue: one session's messages in send order, session state set and read back by a
// later receiver, the session lock held exclusively (a second accept is refused with
// com.microsoft:session-cannot-be-locked) and renewed ("Message sessions").
func TestAcceptSessionStateAndLock(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-sessions")
	for _, m := range []*azservicebus.Message{
		sessionMessage("a-1", "s-a"), sessionMessage("b-1", "s-b"), sessionMessage("a-2", "s-a"),
		sessionMessage("a-3", "s-a"),
	} {
		must(t, sender.SendMessage(ctxT(t), m, nil))
	}

	// A session-enabled queue refuses a message without a session id.
	err := sender.SendMessage(ctxT(t), textMessage("no-session", "x"), nil)
	if err == nil {
		t.Fatal("a message without SessionID was accepted by a session-enabled queue")
	}

	session, err := client.AcceptSessionForQueue(ctxT(t), "go-sessions", "s-a", nil)
	must(t, err)
	t.Cleanup(func() { _ = session.Close(ctxT(t)) })
	if session.SessionID() != "s-a" {
		t.Fatalf("session id %q", session.SessionID())
	}
	lockedUntil := session.LockedUntil()
	if !lockedUntil.After(time.Now()) {
		t.Fatalf("session locked until %v", lockedUntil)
	}
	state, err := session.GetSessionState(ctxT(t), nil)
	must(t, err)
	if state != nil {
		t.Fatalf("new session has state %q", state)
	}

	got := receiveN(t, session, 3, 20*time.Second)
	equalStrings(t, "session s-a", ids(got), []string{"a-1", "a-2", "a-3"})
	for _, m := range got {
		if m.SessionID == nil || *m.SessionID != "s-a" {
			t.Fatalf("message %s has session %v", m.MessageID, m.SessionID)
		}
		must(t, session.CompleteMessage(ctxT(t), m, nil))
	}
	must(t, session.SetSessionState(ctxT(t), []byte(`{"step":2,"owner":"go"}`), nil))

	_, err = client.AcceptSessionForQueue(ctxT(t), "go-sessions", "s-a", nil)
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != "com.microsoft:session-cannot-be-locked" {
		t.Fatalf("second accept of a locked session: %v", err)
	}

	time.Sleep(1100 * time.Millisecond)
	must(t, session.RenewSessionLock(ctxT(t), nil))
	if !session.LockedUntil().After(lockedUntil) {
		t.Fatalf("renewal kept the lock at %v (was %v)", session.LockedUntil(), lockedUntil)
	}
	must(t, session.Close(ctxT(t)))

	again, err := client.AcceptSessionForQueue(ctxT(t), "go-sessions", "s-a", nil)
	must(t, err)
	state, err = again.GetSessionState(ctxT(t), nil)
	must(t, err)
	if string(state) != `{"step":2,"owner":"go"}` {
		t.Fatalf("state read back %q", state)
	}
	must(t, again.SetSessionState(ctxT(t), nil, nil))
	must(t, again.Close(ctxT(t)))

	other, err := client.AcceptSessionForQueue(ctxT(t), "go-sessions", "s-b", nil)
	must(t, err)
	b := receiveN(t, other, 1, 20*time.Second)
	equalStrings(t, "session s-b", ids(b), []string{"b-1"})
	must(t, other.CompleteMessage(ctxT(t), b[0], nil))
	must(t, other.Close(ctxT(t)))
}

// AcceptNextSessionForQueue takes each session that has messages, one after the other, and then
// reports that none is left with the SDK's own timeout error.
func TestAcceptNextSession(t *testing.T) {
	client := newClient(t)
	sender := newSender(t, client, "go-next-sessions")
	must(t, sender.SendMessage(ctxT(t), sessionMessage("n-1", "s-first"), nil))
	must(t, sender.SendMessage(ctxT(t), sessionMessage("n-2", "s-second"), nil))

	var sessions []string
	for i := 0; i < 2; i++ {
		session, err := client.AcceptNextSessionForQueue(ctxT(t), "go-next-sessions", nil)
		must(t, err)
		got := receiveN(t, session, 1, 20*time.Second)
		if len(got) != 1 || got[0].SessionID == nil || *got[0].SessionID != session.SessionID() {
			t.Fatalf("session %s gave %v", session.SessionID(), ids(got))
		}
		sessions = append(sessions, session.SessionID())
		must(t, session.CompleteMessage(ctxT(t), got[0], nil))
		must(t, session.Close(ctxT(t)))
	}
	sort.Strings(sessions)
	equalStrings(t, "sessions taken", sessions, []string{"s-first", "s-second"})

	// No session left: the SDK asks the broker to wait (com.microsoft:timeout, the context's deadline
	// less a jitter of at most 1%, capped at 100 ms) and the broker detaches with com.microsoft:timeout,
	// which the SDK reports as CodeTimeout. The margin is the SDK's own and a few tens of milliseconds:
	// on a loaded machine the context can run out first, so that outcome is accepted too; a session
	// handed out, or any other error, fails.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	session, err := client.AcceptNextSessionForQueue(ctx, "go-next-sessions", nil)
	var sbErr *azservicebus.Error
	switch {
	case err == nil:
		t.Fatalf("accept-next with no session left got session %q", session.SessionID())
	case errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout:
	case errors.Is(err, context.DeadlineExceeded):
		t.Logf("the context ran out before the broker's timeout detach arrived: %v", err)
	default:
		t.Fatalf("accept-next with no session left: %v", err)
	}
}

// A receiver without a session on a session-enabled queue is refused when its link opens, with
// amqp:not-allowed and the description Service Bus gives; the same holds for a peek through it (the
// Go SDK's live test TestSessionReceiver_nonSessionReceiver expects exactly this of Service Bus).
func TestNonSessionReceiverOnSessionQueueIsRefused(t *testing.T) {
	client := newClient(t)
	must(t, newSender(t, client, "go-sessions").SendMessage(ctxT(t), sessionMessage("ns-1", "s-ns"), nil))
	receiver := newReceiver(t, client, "go-sessions", nil)
	const want = "It is not possible for an entity that requires sessions to create a non-sessionful message receiver."

	messages, err := receiver.ReceiveMessages(ctxT(t), 1, nil)
	var amqpErr *amqp.Error
	if len(messages) != 0 || !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotAllowed ||
		!strings.Contains(amqpErr.Description, want) {
		t.Fatalf("receive without a session: %d messages, %v", len(messages), err)
	}
	messages, err = receiver.PeekMessages(ctxT(t), 1, nil)
	if len(messages) != 0 || !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotAllowed ||
		!strings.Contains(amqpErr.Description, want) {
		t.Fatalf("peek without a session: %d messages, %v", len(messages), err)
	}

	session, err := client.AcceptSessionForQueue(ctxT(t), "go-sessions", "s-ns", nil)
	must(t, err)
	t.Cleanup(func() { _ = session.Close(ctxT(t)) })
	got := receiveN(t, session, 1, 20*time.Second)
	equalStrings(t, "session s-ns", ids(got), []string{"ns-1"})
	must(t, session.CompleteMessage(ctxT(t), got[0], nil))
}
