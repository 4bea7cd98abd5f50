// Package interop runs the official Go Service Bus SDK (azservicebus and its admin package) unchanged
// against sbemulator. The emulator is started by tests/interop/test_go_sdk.py (or by hand, see
// docs/interop.md), which passes its addresses in the environment:
//
//	SB_CONNECTION_STRING  the AMQP connection string (UseDevelopmentEmulator=true, plain TCP)
//	SB_ADMIN_URL          the HTTPS management endpoint, https://127.0.0.1:PORT
//	SB_CA_PATH            the PEM file of the CA that signed the management endpoint's certificate
//
// (the same variables as the Java suite's, so one emulator serves both when run by hand).
// The entities come from topology.json beside this file; each test uses its own, so the tests do not
// see each other's messages even though they share one emulator.
package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// opTimeout bounds every single SDK call: a hang fails the test instead of the whole run's -timeout.
const opTimeout = 30 * time.Second

func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s is not set: start an emulator with tests/interop/go/topology.json (docs/interop.md)", name)
	}
	return v
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a Client from the emulator connection string, closed when the test ends.
func newClient(t *testing.T) *azservicebus.Client {
	t.Helper()
	client, err := azservicebus.NewClientFromConnectionString(env(t, "SB_CONNECTION_STRING"), nil)
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_ = client.Close(ctx)
	})
	return client
}

// newAdminClient trusts the emulator's own CA the way a Go user would: an http.Client whose TLS config
// has that CA in RootCAs, handed to azcore as the pipeline's Transport (an *http.Client satisfies
// policy.Transporter). No InsecureSkipVerify: the certificate is checked against 127.0.0.1.
func newAdminClient(t *testing.T) *admin.Client {
	t.Helper()
	return newAdminClientFrom(t, adminConnectionString(t))
}

// newAdminClientFrom is newAdminClient with a connection string of the caller's (its Endpoint the
// management endpoint's host and port).
func newAdminClientFrom(t *testing.T, connectionString string) *admin.Client {
	t.Helper()
	pem, err := os.ReadFile(env(t, "SB_CA_PATH"))
	must(t, err)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", os.Getenv("SB_CA_PATH"))
	}
	transport := &http.Client{
		Timeout:   opTimeout,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}
	client, err := admin.NewClientFromConnectionString(connectionString,
		&admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: transport}})
	must(t, err)
	return client
}

// adminConnectionString is the emulator connection string with the management endpoint's host and
// port in Endpoint: the admin client builds its https:// URL from the endpoint's host[:port] (it keeps
// the port, unlike the Java SDK's builder) and ignores UseDevelopmentEmulator.
func adminConnectionString(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(env(t, "SB_ADMIN_URL"))
	must(t, err)
	endpoint := regexp.MustCompile(`(?i)Endpoint=[^;]*`)
	return endpoint.ReplaceAllString(env(t, "SB_CONNECTION_STRING"), "Endpoint=sb://"+u.Host)
}

func newSender(t *testing.T, client *azservicebus.Client, entity string) *azservicebus.Sender {
	t.Helper()
	sender, err := client.NewSender(entity, nil)
	must(t, err)
	t.Cleanup(func() { _ = sender.Close(context.Background()) })
	return sender
}

func newReceiver(t *testing.T, client *azservicebus.Client, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	receiver, err := client.NewReceiverForQueue(queue, opts)
	must(t, err)
	t.Cleanup(func() { _ = receiver.Close(context.Background()) })
	return receiver
}

// messageReceiver is what Receiver and SessionReceiver share for receiving.
type messageReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// receiveN keeps calling ReceiveMessages until n messages arrived or wait ran out: one call returns
// what arrived shortly after the first message, not necessarily everything.
func receiveN(t *testing.T, r messageReceiver, n int, wait time.Duration) []*azservicebus.ReceivedMessage {
	t.Helper()
	var out []*azservicebus.ReceivedMessage
	deadline := time.Now().Add(wait)
	for len(out) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		got, err := r.ReceiveMessages(ctx, n-len(out), nil)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ReceiveMessages: %v", err)
		}
		out = append(out, got...)
	}
	return out
}

// receiveNone asserts that nothing arrives within wait.
func receiveNone(t *testing.T, r messageReceiver, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	got, err := r.ReceiveMessages(ctx, 10, nil)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReceiveMessages: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("expected no message, got %d (first id %s)", len(got), got[0].MessageID)
	}
}

func textMessage(id, body string) *azservicebus.Message {
	return &azservicebus.Message{MessageID: &id, Body: []byte(body)}
}

func ids(messages []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(messages))
	for i, m := range messages {
		out[i] = m.MessageID
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}
