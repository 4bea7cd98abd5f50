// The Service Bus namespace and its queues and topics, built from one namespace entry of servicebus.json
// (the official emulator's Config.json schema). Durations (LockDuration, DefaultMessageTimeToLive, ...)
// are ISO 8601 in both Config.json and ARM, so they are passed through unchanged.

@description('Globally unique namespace name. The Name inside servicebus.json is the emulator\'s fixed "sbemulatorns" and is ignored here.')
param namespaceName string

param location string
param tags object = {}

@description('One entry of UserConfig.Namespaces from servicebus.json: { Name, Queues, Topics }.')
param entities object

@allowed([
  'Standard'
  'Premium'
])
@description('Standard is the smallest tier with topics.')
param skuName string = 'Standard'

resource namespace 'Microsoft.ServiceBus/namespaces@2026-01-01' = {
  name: namespaceName
  location: location
  tags: tags
  sku: {
    name: skuName
    tier: skuName
  }
  properties: {
    // Identity only: no SAS keys, so the only way in is a Microsoft Entra token and a data role.
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
  }
}

// Config.json writes "no forwarding" as an empty string; ARM wants the property left out (null).
resource queues 'Microsoft.ServiceBus/namespaces/queues@2026-01-01' = [for queue in (entities.?Queues ?? []): {
  parent: namespace
  name: queue.Name
  properties: {
    lockDuration: queue.Properties.?LockDuration
    maxDeliveryCount: queue.Properties.?MaxDeliveryCount
    requiresSession: queue.Properties.?RequiresSession
    requiresDuplicateDetection: queue.Properties.?RequiresDuplicateDetection
    duplicateDetectionHistoryTimeWindow: queue.Properties.?DuplicateDetectionHistoryTimeWindow
    defaultMessageTimeToLive: queue.Properties.?DefaultMessageTimeToLive
    deadLetteringOnMessageExpiration: queue.Properties.?DeadLetteringOnMessageExpiration
    forwardTo: empty(queue.Properties.?ForwardTo ?? '') ? null : queue.Properties.ForwardTo
    forwardDeadLetteredMessagesTo: empty(queue.Properties.?ForwardDeadLetteredMessagesTo ?? '') ? null : queue.Properties.ForwardDeadLetteredMessagesTo
  }
}]

// Topics, subscriptions and rules are nested one module level each, so no nested loops are needed.
module topics 'servicebus-topic.bicep' = [for topic in (entities.?Topics ?? []): {
  name: 'sbtopic-${topic.Name}'
  params: {
    namespaceName: namespace.name
    topic: topic
  }
}]

output name string = namespace.name
output id string = namespace.id
// serviceBusEndpoint is https://<name>.servicebus.windows.net:443/ (or the sovereign-cloud suffix).
output fullyQualifiedNamespace string = replace(replace(namespace.properties.serviceBusEndpoint, 'https://', ''), ':443/', '')
