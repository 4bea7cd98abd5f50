package interop

import (
	"errors"
	"regexp"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// A connection string with the wrong key is refused at the token exchange: the SDK reports its own
// azservicebus.Error with CodeUnauthorizedAccess (the put-token reply's 401), and does not retry it.
func TestWrongKeyIsUnauthorized(t *testing.T) {
	good := env(t, "SB_CONNECTION_STRING")
	bad := regexp.MustCompile(`SharedAccessKey=[^;]*`).ReplaceAllString(good, "SharedAccessKey=not-the-key")
	client, err := azservicebus.NewClientFromConnectionString(bad, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 1},
	})
	must(t, err)
	t.Cleanup(func() { _ = client.Close(ctxT(t)) })
	sender, err := client.NewSender("go-send", nil)
	must(t, err)
	err = sender.SendMessage(ctxT(t), textMessage("unauthorized", "x"), nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		t.Fatalf("send with a wrong key: %v", err)
	}
}
