// One topic of servicebus.json and its subscriptions.

param namespaceName string

@description('One entry of Topics from servicebus.json: { Name, Properties, Subscriptions }.')
param topic object

resource namespace 'Microsoft.ServiceBus/namespaces@2026-01-01' existing = {
  name: namespaceName
}

resource topicResource 'Microsoft.ServiceBus/namespaces/topics@2026-01-01' = {
  parent: namespace
  name: topic.Name
  properties: {
    defaultMessageTimeToLive: topic.?Properties.?DefaultMessageTimeToLive
    duplicateDetectionHistoryTimeWindow: topic.?Properties.?DuplicateDetectionHistoryTimeWindow
    requiresDuplicateDetection: topic.?Properties.?RequiresDuplicateDetection
  }
}

module subscriptions 'servicebus-subscription.bicep' = [for subscription in (topic.?Subscriptions ?? []): {
  name: 'sbsub-${topic.Name}-${subscription.Name}'
  params: {
    namespaceName: namespaceName
    topicName: topicResource.name
    subscription: subscription
  }
}]

output name string = topicResource.name
