package interop

import (
	"errors"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// A topic with a SQL rule (with an action) and a correlation rule, created through the admin client
// over the emulator's HTTPS endpoint ("Topic filters and actions"): each subscription receives what
// its rule selects, and the SQL action's SET shows on the message.
func TestTopicWithSQLAndCorrelationRules(t *testing.T) {
	adm := newAdminClient(t)
	ctx := ctxT(t)
	const topic = "go-rules-topic"
	_, err := adm.CreateTopic(ctx, topic, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteTopic(ctxT(t), topic, nil) })
	for _, sub := range []string{"sql", "corr"} {
		_, err = adm.CreateSubscription(ctx, topic, sub, nil)
		must(t, err)
		_, err = adm.DeleteRule(ctx, topic, sub, "$Default", nil)
		must(t, err)
	}
	_, err = adm.CreateRule(ctx, topic, "sql", &admin.CreateRuleOptions{
		Name:   ptr("high"),
		Filter: &admin.SQLFilter{Expression: "Priority = 'High' AND Size > 10"},
		Action: &admin.SQLAction{Expression: "SET Tagged = 'yes'"},
	})
	must(t, err)
	_, err = adm.CreateRule(ctx, topic, "corr", &admin.CreateRuleOptions{
		Name: ptr("orders"),
		Filter: &admin.CorrelationFilter{
			CorrelationID:         ptr("order-7"),
			ApplicationProperties: map[string]any{"Region": "eu"},
		},
	})
	must(t, err)

	// The rules read back as they were written.
	rule, err := adm.GetRule(ctx, topic, "sql", "high", nil)
	must(t, err)
	if f, ok := rule.Filter.(*admin.SQLFilter); !ok || f.Expression != "Priority = 'High' AND Size > 10" {
		t.Fatalf("sql rule filter %#v", rule.Filter)
	}
	if a, ok := rule.Action.(*admin.SQLAction); !ok || a.Expression != "SET Tagged = 'yes'" {
		t.Fatalf("sql rule action %#v", rule.Action)
	}
	var names []string
	pager := adm.NewListRulesPager(topic, "corr", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		must(t, err)
		for _, r := range page.Rules {
			names = append(names, r.Name)
			if f, ok := r.Filter.(*admin.CorrelationFilter); !ok || f.CorrelationID == nil || *f.CorrelationID != "order-7" ||
				f.ApplicationProperties["Region"] != "eu" {
				t.Fatalf("correlation rule %s filter %#v", r.Name, r.Filter)
			}
		}
	}
	sort.Strings(names)
	equalStrings(t, "rules on corr", names, []string{"orders"})

	client := newClient(t)
	sender := newSender(t, client, topic)
	send := func(id string, corr *string, props map[string]any) {
		must(t, sender.SendMessage(ctxT(t), &azservicebus.Message{
			MessageID: &id, CorrelationID: corr, Body: []byte(id), ApplicationProperties: props,
		}, nil))
	}
	send("m-high-big", nil, map[string]any{"Priority": "High", "Size": int64(20)})
	send("m-high-small", nil, map[string]any{"Priority": "High", "Size": int64(5)})
	send("m-order-eu", ptr("order-7"), map[string]any{"Region": "eu"})
	send("m-order-us", ptr("order-7"), map[string]any{"Region": "us"})

	sqlReceiver, err := client.NewReceiverForSubscription(topic, "sql", nil)
	must(t, err)
	t.Cleanup(func() { _ = sqlReceiver.Close(ctxT(t)) })
	got := receiveN(t, sqlReceiver, 1, 20*time.Second)
	equalStrings(t, "sql subscription", ids(got), []string{"m-high-big"})
	if got[0].ApplicationProperties["Tagged"] != "yes" {
		t.Fatalf("the rule action did not set Tagged: %#v", got[0].ApplicationProperties)
	}
	must(t, sqlReceiver.CompleteMessage(ctxT(t), got[0], nil))
	receiveNone(t, sqlReceiver, 2*time.Second)

	corrReceiver, err := client.NewReceiverForSubscription(topic, "corr", nil)
	must(t, err)
	t.Cleanup(func() { _ = corrReceiver.Close(ctxT(t)) })
	got = receiveN(t, corrReceiver, 1, 20*time.Second)
	equalStrings(t, "correlation subscription", ids(got), []string{"m-order-eu"})
	must(t, corrReceiver.CompleteMessage(ctxT(t), got[0], nil))
	receiveNone(t, corrReceiver, 2*time.Second)

	// Runtime properties through the admin client agree: nothing left on either subscription.
	props, err := adm.GetSubscriptionRuntimeProperties(ctx, topic, "sql", nil)
	must(t, err)
	if props.ActiveMessageCount != 0 {
		t.Fatalf("active messages left on sql: %d", props.ActiveMessageCount)
	}

	// A rule on a subscription that does not exist is a 404 the SDK surfaces as azcore.ResponseError.
	_, err = adm.CreateRule(ctx, topic, "missing", &admin.CreateRuleOptions{Name: ptr("x"), Filter: &admin.TrueFilter{}})
	var respErr *azcore.ResponseError
	if !errors.As(err, &respErr) || respErr.StatusCode != http.StatusNotFound {
		t.Fatalf("rule on a missing subscription: %v", err)
	}
}
