// Service Bus data roles for one identity (a Function App's or a developer's), each scoped to a single entity (topic, queue or topic
// subscription) rather than the namespace.

param namespaceName string

@description('Object id of the identity (a Function App\'s system-assigned identity).')
param principalId string

@allowed([
  'ServicePrincipal'
  'User'
  'Group'
])
@description('Managed identities are ServicePrincipal; a developer running the CLIs is User.')
param principalType string = 'ServicePrincipal'

@description('Topic names the identity may send to.')
param topicSenders array = []

@description('Queue names the identity may send to.')
param queueSenders array = []

@description('Queue names the identity may receive from.')
param queueReceivers array = []

@description('Topic subscriptions the identity may receive from: [{ topic, subscription }].')
param subscriptionReceivers array = []

// Built-in role definition ids.
var roleIds = {
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
}

resource namespace 'Microsoft.ServiceBus/namespaces@2026-01-01' existing = {
  name: namespaceName
}

resource sendTopics 'Microsoft.ServiceBus/namespaces/topics@2026-01-01' existing = [for topicName in topicSenders: {
  parent: namespace
  name: topicName
}]

resource sendQueues 'Microsoft.ServiceBus/namespaces/queues@2026-01-01' existing = [for queueName in queueSenders: {
  parent: namespace
  name: queueName
}]

resource receiveQueues 'Microsoft.ServiceBus/namespaces/queues@2026-01-01' existing = [for queueName in queueReceivers: {
  parent: namespace
  name: queueName
}]

resource receiveSubscriptionTopics 'Microsoft.ServiceBus/namespaces/topics@2026-01-01' existing = [for entry in subscriptionReceivers: {
  parent: namespace
  name: entry.topic
}]

resource receiveSubscriptions 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2026-01-01' existing = [for (entry, i) in subscriptionReceivers: {
  parent: receiveSubscriptionTopics[i]
  name: entry.subscription
}]

resource topicSenderAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (topicName, i) in topicSenders: {
  name: guid(sendTopics[i].id, principalId, roleIds.serviceBusDataSender)
  scope: sendTopics[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleIds.serviceBusDataSender)
    principalId: principalId
    principalType: principalType
  }
}]

resource queueSenderAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (queueName, i) in queueSenders: {
  name: guid(sendQueues[i].id, principalId, roleIds.serviceBusDataSender)
  scope: sendQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleIds.serviceBusDataSender)
    principalId: principalId
    principalType: principalType
  }
}]

resource queueReceiverAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (queueName, i) in queueReceivers: {
  name: guid(receiveQueues[i].id, principalId, roleIds.serviceBusDataReceiver)
  scope: receiveQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleIds.serviceBusDataReceiver)
    principalId: principalId
    principalType: principalType
  }
}]

resource subscriptionReceiverAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (entry, i) in subscriptionReceivers: {
  name: guid(receiveSubscriptions[i].id, principalId, roleIds.serviceBusDataReceiver)
  scope: receiveSubscriptions[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleIds.serviceBusDataReceiver)
    principalId: principalId
    principalType: principalType
  }
}]
