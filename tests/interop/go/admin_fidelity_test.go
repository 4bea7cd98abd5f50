package interop

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// What Microsoft's own Go tests (azservicebus v1.11.0, admin/admin_client_test.go) expect of the
// management API, each case naming the test it follows. The keys: topology.json's NoManage (Listen, Send).
const noManageKey = "Tm9NYW5hZ2VLZXlOb01hbmFnZUtleU5vTWFuYWdlS2V5MDE="

// newAdminClientWithKey is newAdminClient signed with another of the namespace's keys.
func newAdminClientWithKey(t *testing.T, keyName, key string) *admin.Client {
	t.Helper()
	cs := env(t, "SB_CONNECTION_STRING")
	cs = regexp.MustCompile(`SharedAccessKeyName=[^;]*`).ReplaceAllString(cs, "SharedAccessKeyName="+keyName)
	cs = regexp.MustCompile(`SharedAccessKey=[^;]*`).ReplaceAllString(cs, "SharedAccessKey="+key)
	// newAdminClient and newClient read it from here on; restored when the test ends
	t.Setenv("SB_CONNECTION_STRING", cs)
	return newAdminClient(t)
}

func wantErrorContaining(t *testing.T, what string, err error, status int, text string) {
	t.Helper()
	var re *azcore.ResponseError
	if err == nil || !strings.Contains(err.Error(), text) {
		t.Fatalf("%s: want an error containing %q, got %v", what, text, err)
	}
	if status != 0 && (!errors.As(err, &re) || re.StatusCode != status) {
		t.Fatalf("%s: want HTTP %d, got %v", what, status, err)
	}
}

// A partitioned Standard entity has 16 partitions of MaxSizeInMegabytes each, and Service Bus reports
// the whole: 4096 -> 65536; the update round trip (a GET's properties sent back) keeps it.
// Follows TestAdminClient_QueueWithMaxValues, TestAdminClient_CreateQueue and TestAdminClient_CreateTopic.
func TestPartitionedEntityReportsItsSizeOverAllPartitions(t *testing.T) {
	adm := newAdminClient(t)
	ctx := ctxT(t)
	const queue, topic = "go-partitioned-q", "go-partitioned-t"
	_, err := adm.CreateQueue(ctx, queue, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		EnablePartitioning: ptr(true), MaxSizeInMegabytes: ptr(int32(4096)),
	}})
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteQueue(ctxT(t), queue, nil) })
	got, err := adm.GetQueue(ctx, queue, nil)
	must(t, err)
	if *got.MaxSizeInMegabytes != 16*4096 {
		t.Fatalf("partitioned queue of 4096 MB reports %d", *got.MaxSizeInMegabytes)
	}
	updated, err := adm.UpdateQueue(ctx, queue, got.QueueProperties, nil)
	must(t, err)
	again, err := adm.GetQueue(ctx, queue, nil)
	must(t, err)
	if *updated.MaxSizeInMegabytes != 16*4096 || *again.MaxSizeInMegabytes != 16*4096 {
		t.Fatalf("after the round trip: update %d, get %d", *updated.MaxSizeInMegabytes, *again.MaxSizeInMegabytes)
	}
	created, err := adm.CreateTopic(ctx, topic, &admin.CreateTopicOptions{Properties: &admin.TopicProperties{
		EnablePartitioning: ptr(true), MaxSizeInMegabytes: ptr(int32(2048)),
	}})
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteTopic(ctxT(t), topic, nil) })
	if *created.MaxSizeInMegabytes != 16*2048 {
		t.Fatalf("partitioned topic of 2048 MB reports %d", *created.MaxSizeInMegabytes)
	}
	plain, err := adm.GetQueue(ctx, "go-send", nil)
	must(t, err)
	if *plain.MaxSizeInMegabytes != 1024 {
		t.Fatalf("a queue without partitioning reports %d", *plain.MaxSizeInMegabytes)
	}
}

// AccessedAt of a queue or topic nothing was sent to is the zero time; a send sets it. A subscription
// reports a time. Follows TestAdminClient_QueueWithMaxValues (AccessedAt.IsZero()),
// TestAdminClient_CreateQueue (require.Zero(AccessedAt)) and TestAdminClient_ListSubscriptionRuntimeProperties.
func TestNeverUsedEntityWasNeverAccessed(t *testing.T) {
	adm := newAdminClient(t)
	ctx := ctxT(t)
	const queue, topic = "go-accessed-q", "go-accessed-t"
	_, err := adm.CreateQueue(ctx, queue, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteQueue(ctxT(t), queue, nil) })
	_, err = adm.CreateTopic(ctx, topic, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteTopic(ctxT(t), topic, nil) })
	_, err = adm.CreateSubscription(ctx, topic, "sub", nil)
	must(t, err)

	q, err := adm.GetQueueRuntimeProperties(ctx, queue, nil)
	must(t, err)
	tp, err := adm.GetTopicRuntimeProperties(ctx, topic, nil)
	must(t, err)
	if !q.AccessedAt.IsZero() || !tp.AccessedAt.IsZero() || q.CreatedAt.IsZero() || q.UpdatedAt.IsZero() {
		t.Fatalf("never used: queue accessed %v (created %v), topic accessed %v", q.AccessedAt, q.CreatedAt, tp.AccessedAt)
	}
	sub, err := adm.GetSubscriptionRuntimeProperties(ctx, topic, "sub", nil)
	must(t, err)
	if sub.AccessedAt.IsZero() {
		t.Fatalf("a subscription reports the zero time")
	}

	sender := newSender(t, newClient(t), queue)
	must(t, sender.SendMessage(ctxT(t), textMessage("accessed", "x"), nil))
	q, err = adm.GetQueueRuntimeProperties(ctx, queue, nil)
	must(t, err)
	if q.AccessedAt.IsZero() || q.AccessedAt.Before(q.CreatedAt) {
		t.Fatalf("after a send: accessed %v, created %v", q.AccessedAt, q.CreatedAt)
	}
}

// An entity's authorization rules come back as they were sent, without CreatedTime and ModifiedTime,
// from create, update and get alike. Follows TestAdminClient_UpdateQueue and TestAdminClient_UpdateTopic
// (require.EqualValues(createdProps.AuthorizationRules, updatedProps.AuthorizationRules)).
func TestAuthorizationRulesComeBackAsSent(t *testing.T) {
	adm := newAdminClient(t)
	ctx := ctxT(t)
	const queue = "go-rules-q"
	rules := []admin.AuthorizationRule{{
		AccessRights: []admin.AccessRight{admin.AccessRightSend}, KeyName: ptr("keyName1"),
		PrimaryKey:   ptr("cHJpbWFyeWtleXByaW1hcnlrZXlwcmltYXJ5a2V5MDE="),
		SecondaryKey: ptr("c2Vjb25kYXJ5a2V5c2Vjb25kYXJ5a2V5c2Vjb25kMDE="),
	}}
	created, err := adm.CreateQueue(ctx, queue, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		AuthorizationRules: rules,
	}})
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteQueue(ctxT(t), queue, nil) })
	props := created.QueueProperties
	props.MaxDeliveryCount = ptr(int32(101))
	updated, err := adm.UpdateQueue(ctx, queue, props, nil)
	must(t, err)
	got, err := adm.GetQueue(ctx, queue, nil)
	must(t, err)
	for what, have := range map[string][]admin.AuthorizationRule{
		"create": created.AuthorizationRules, "update": updated.AuthorizationRules, "get": got.AuthorizationRules,
	} {
		if len(have) != 1 || have[0].CreatedTime != nil || have[0].ModifiedTime != nil ||
			*have[0].KeyName != "keyName1" || *have[0].PrimaryKey != *rules[0].PrimaryKey {
			t.Fatalf("%s returned rules %+v", what, have)
		}
	}
}

// Properties fixed at creation are refused with Service Bus's texts. Follows TestAdminClient_UpdateQueue,
// TestAdminClient_UpdateSubscription and TestAdminClient_UpdateTopic.
func TestImmutablePropertiesAreRefusedWithServiceBusTexts(t *testing.T) {
	adm := newAdminClient(t)
	ctx := ctxT(t)
	const queue, topic = "go-immutable-q", "go-immutable-t"
	created, err := adm.CreateQueue(ctx, queue, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteQueue(ctxT(t), queue, nil) })
	props := created.QueueProperties
	props.RequiresSession = ptr(true)
	_, err = adm.UpdateQueue(ctx, queue, props, nil)
	wantErrorContaining(t, "queue RequiresSession", err, 400,
		"The value for the RequiresSession property of an existing Queue cannot be changed")

	topicProps, err := adm.CreateTopic(ctx, topic, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteTopic(ctxT(t), topic, nil) })
	sub, err := adm.CreateSubscription(ctx, topic, "sub", nil)
	must(t, err)
	subProps := sub.SubscriptionProperties
	subProps.RequiresSession = ptr(true)
	_, err = adm.UpdateSubscription(ctx, topic, "sub", subProps, nil)
	wantErrorContaining(t, "subscription RequiresSession", err, 400,
		"The value for the RequiresSession property of an existing Subscription cannot be changed")

	tp := topicProps.TopicProperties
	tp.EnablePartitioning = ptr(true)
	_, err = adm.UpdateTopic(ctx, topic, tp, nil)
	wantErrorContaining(t, "topic EnablePartitioning", err, 400, "Partitioning cannot be changed for Topic. ")
}

// A key without Manage: a GET of a missing queue or topic is "not found" (nil, no error), and every
// other management call is 401 with Service Bus's text for its action. Follows
// TestAdminClient_LackPermissions_Queue, TestAdminClient_LackPermissions_Topic and
// TestAdminClient_LackPermissions_Subscription.
func TestManagementWithoutManageRight(t *testing.T) {
	adm := newAdminClient(t)
	ctx := ctxT(t)
	const topic, queue = "go-nomanage-t", "go-nomanage-q"
	_, err := adm.CreateQueue(ctx, queue, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteQueue(context.Background(), queue, nil) })
	_, err = adm.CreateTopic(ctx, topic, nil)
	must(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteTopic(context.Background(), topic, nil) })
	_, err = adm.CreateSubscription(ctx, topic, "sub", nil)
	must(t, err)

	low := newAdminClientWithKey(t, "NoManage", noManageKey)
	missingQueue, err := low.GetQueue(ctx, "not-found-queue", nil)
	must(t, err)
	missingTopic, err := low.GetTopicRuntimeProperties(ctx, "not-found-topic", nil)
	must(t, err)
	if missingQueue != nil || missingTopic != nil {
		t.Fatalf("missing entities read as %+v, %+v", missingQueue, missingTopic)
	}

	read := "Manage,EntityRead claims required for this operation"
	_, err = low.GetQueue(ctx, queue, nil)
	wantErrorContaining(t, "get queue", err, 401, read)
	_, err = low.NewListQueuesPager(nil).NextPage(ctx)
	wantErrorContaining(t, "list queues", err, 401, read)
	_, err = low.GetTopic(ctx, topic, nil)
	wantErrorContaining(t, "get topic", err, 401, ">"+read)
	_, err = low.CreateQueue(ctx, "canneverbecreated", nil)
	wantErrorContaining(t, "create queue", err, 401, "Authorization failed for specified action: Manage,EntityWrite")
	_, err = low.UpdateTopic(ctx, "canneverbecreated", admin.TopicProperties{}, nil)
	wantErrorContaining(t, "update topic", err, 401, "Authorization failed for specified action: Manage,EntityWrite")
	_, err = low.DeleteQueue(ctx, queue, nil)
	wantErrorContaining(t, "delete queue", err, 401, "Authorization failed for specified action: Manage,EntityDelete.")

	unauthorized := "401 SubCode=40100: Unauthorized : Unauthorized access for "
	_, err = low.GetSubscription(ctx, topic, "not-found-sub", nil)
	wantErrorContaining(t, "get missing subscription", err, 401, unauthorized+"'GetSubscription'")
	_, err = low.GetSubscription(ctx, topic, "sub", nil)
	wantErrorContaining(t, "get subscription", err, 401, unauthorized+"'GetSubscription'")
	_, err = low.NewListSubscriptionsPager(topic, nil).NextPage(ctx)
	wantErrorContaining(t, "list subscriptions", err, 401, unauthorized+"'EnumerateSubscriptions' operation")
	_, err = low.CreateSubscription(ctx, topic, "canneverbecreated", nil)
	wantErrorContaining(t, "create subscription", err, 401, unauthorized+"'CreateOrUpdateSubscription'")
	_, err = low.DeleteSubscription(ctx, topic, "sub", nil)
	wantErrorContaining(t, "delete subscription", err, 401, unauthorized+"'DeleteSubscription'")

	// The same key still sends and receives (newClient reads the connection string the key is in now):
	// only management needs Manage.
	sender := newSender(t, newClient(t), queue)
	must(t, sender.SendMessage(ctxT(t), textMessage("nomanage", "x"), nil))
	received := receiveN(t, newReceiver(t, newClient(t), queue, &azservicebus.ReceiverOptions{
		ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 1, 20*time.Second)
	if len(received) != 1 {
		t.Fatalf("the message sent with the NoManage key did not arrive")
	}
}
