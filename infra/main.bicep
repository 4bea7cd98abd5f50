// The whole deployment: one Service Bus namespace whose entities come from servicebus.json (the same
// file the emulators read), a storage account for the Functions host and the results table, monitoring,
// and one Flex Consumption Function App per role, all running the same code package.
//
// Access is identity-only: the namespace and the storage account refuse keys, every app has a
// system-assigned identity, and each identity gets data roles on exactly the entities its role touches.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name: names the resource group and seeds the hash in every resource name.')
param environmentName string

@minLength(1)
@description('Region for every resource; it must offer the Flex Consumption plan.')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

// Scale-out limits, one per role. The high-priority pool is allowed far more instances than the
// low-priority one: that difference is the Priority Queue pattern.
@minValue(1)
@maxValue(1000)
@description('Flex Consumption maximumInstanceCount of the sender app (a timer: one instance is enough).')
param senderMaximumInstanceCount int = 1

@minValue(1)
@maxValue(1000)
@description('Flex Consumption maximumInstanceCount of the high-priority consumer app.')
param consumerHighMaximumInstanceCount int = 40

@minValue(1)
@maxValue(1000)
@description('Flex Consumption maximumInstanceCount of the low-priority consumer app.')
param consumerLowMaximumInstanceCount int = 5

@minValue(1)
@maxValue(1000)
@description('Flex Consumption maximumInstanceCount of the leveling worker (bounds the load on the table).')
param levelerMaximumInstanceCount int = 4

@minValue(1)
@maxValue(1000)
@description('Flex Consumption maximumInstanceCount of the per-tenant ordered writer: at most this many instances hold tenant sessions.')
param orderedMaximumInstanceCount int = 4

@minValue(1)
@description('Service Bus maxConcurrentCalls per instance of the sender app.')
param senderMaxConcurrentCalls int = 1

@minValue(1)
@description('Service Bus maxConcurrentCalls per instance of the high-priority consumer app.')
param consumerHighMaxConcurrentCalls int = 16

@minValue(1)
@description('Service Bus maxConcurrentCalls per instance of the low-priority consumer app.')
param consumerLowMaxConcurrentCalls int = 2

@minValue(1)
@description('Service Bus maxConcurrentCalls per instance of the leveling worker.')
param levelerMaxConcurrentCalls int = 4

@minValue(1)
@description('Service Bus maxConcurrentCalls of the ordered writer; its trigger is session-enabled, so maxConcurrentSessions is what counts.')
param orderedMaxConcurrentCalls int = 1

@minValue(1)
@description('Service Bus maxConcurrentSessions per instance of the ordered writer: tenants one instance processes at once (one message at a time each).')
param orderedMaxConcurrentSessions int = 2

@minValue(0)
@description('Simulated work per ordered write, in milliseconds (0: none).')
param orderedWorkMs int = 0

@minLength(3)
@maxLength(63)
@description('Name of the Azure Table holding the ordered writer\'s per-tenant state and ledger (created on first use).')
param orderedTableName string = 'orderedwrites'

@allowed([
  512
  2048
  4096
])
@description('Memory of each Flex Consumption instance, in MB.')
param instanceMemoryMB int = 2048

@description('NCRONTAB schedule (seconds first) of the sender timer.')
param senderSchedule string = '0,30 * * * * *'

@minValue(1)
@description('Messages the sender publishes per timer tick.')
param senderBatchSize int = 20

@minValue(1)
@description('Table writes per second allowed across all leveler instances together.')
param levelerMaxWritesPerSecond int = 20

@minValue(0)
@description('Simulated work per high-priority message, in milliseconds (0: none).')
param consumerWorkMsHigh int = 0

@minValue(0)
@description('Simulated work per low-priority message, in milliseconds (0: none).')
param consumerWorkMsLow int = 0

@minLength(3)
@maxLength(63)
@description('Name of the Azure Table the leveling worker writes to.')
param resultsTableName string = 'results'

@minLength(3)
@maxLength(63)
@description('Name of the Azure Table in which the leveler instances share their write budget (one entity).')
param levelerBudgetTableName string = 'writebudget'

// The Priority Queue strategy (docs/functions.md, "Strategies"): what the two consumer apps run. The five
// apps exist whatever the strategy (one azd service each); an app a strategy leaves without a function
// scales to zero and costs nothing.
@allowed([
  'separate'
  'shared'
  'strict'
  'aging'
  'fifo'
])
@description('separate: a pool per priority; shared: the consumer-high app serves both subscriptions; strict: the same, low waits while high has messages; aging: separate pools, a low message waiting longer than agingAfterSeconds is promoted to high; fifo: one queue, no priority (the baseline).')
param priorityStrategy string = 'separate'

@minValue(1)
@description('aging: seconds after which a waiting low-priority message is promoted to high.')
param agingAfterSeconds int = 30

@minValue(1)
@description('SLO: target end-to-end latency of a high-priority message, in seconds (the pattern\'s example: 10).')
param sloHighSeconds int = 10

@minValue(1)
@description('SLO: target end-to-end latency of a low-priority message, in seconds.')
param sloLowSeconds int = 120

@minValue(1)
@description('Active messages on the topic above which the backlog alert fires.')
param topicBacklogAlertThreshold int = 1000

@description('Optional e-mail address for the alerts (an action group). Empty: alerts show in the portal only.')
param alertEmail string = ''

@description('Optional object id of a developer (azd passes the signed-in user) allowed to run the CLIs against Azure: publish to the topic and use the session queues. Empty: no grant.')
param developerPrincipalId string = ''

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param developerPrincipalType string = 'User'

// The topology: queues, topics, subscriptions and SQL filters, in the official emulator's Config.json
// schema. This is the only place entity properties are defined.
var topology = loadJsonContent('servicebus.json')
var serviceBusEntities = topology.UserConfig.Namespaces[0]

// Entity names each role touches (the drift test checks that they exist in servicebus.json).
var priorityTopicName = 'messages'
var highPrioritySubscriptionName = 'highPriority'
var lowPrioritySubscriptionName = 'lowPriority'
var levelingQueueName = 'leveling'
var orderedWritesQueueName = 'ordered-writes'
var sessionQueueNames = [
  'leader-election'
  orderedWritesQueueName
]
var priorityFifoQueueName = 'priority-fifo'
// What a strategy adds to the grants below (function_app.STRATEGY_MODULES registers the matching functions):
// indexes into functionApps (0 sender, 1 consumer-high, 2 consumer-low). An app a strategy leaves idle
// keeps its default grant, which nothing uses then.
var strategyGrants = {
  separate: []
  // the low consumer cancels the promoted copy it beats (cancelling is a sender-side operation)
  aging: [
    {
      app: 2
      topicSenders: [
        priorityTopicName
      ]
      queueSenders: []
      queueReceivers: []
      subscriptionReceivers: []
    }
  ]
  shared: [
    {
      app: 1
      topicSenders: []
      queueSenders: []
      queueReceivers: []
      subscriptionReceivers: [
        {
          topic: priorityTopicName
          subscription: lowPrioritySubscriptionName
        }
      ]
    }
  ]
  strict: [
    {
      app: 1
      topicSenders: []
      queueSenders: []
      queueReceivers: []
      subscriptionReceivers: [
        {
          topic: priorityTopicName
          subscription: lowPrioritySubscriptionName
        }
      ]
    }
  ]
  fifo: [
    {
      app: 0
      topicSenders: []
      queueSenders: [
        priorityFifoQueueName
      ]
      queueReceivers: []
      subscriptionReceivers: []
    }
    {
      app: 1
      topicSenders: []
      queueSenders: []
      queueReceivers: [
        priorityFifoQueueName
      ]
      subscriptionReceivers: []
    }
  ]
}
// host.json's maxConcurrentSessions; only the ordered writer has a session-enabled trigger.
var hostJsonMaxConcurrentSessions = 8

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}

// One entry per Function App. The role is both the azd service name and the APP_ROLES value that
// function_app.py reads to decide which blueprints to register.
var functionApps = [
  {
    role: 'sender'
    maximumInstanceCount: senderMaximumInstanceCount
    maxConcurrentCalls: senderMaxConcurrentCalls
    maxConcurrentSessions: hostJsonMaxConcurrentSessions
    topicSenders: [
      priorityTopicName
    ]
    // the feed of the ordered writer: one write per tenant per tick
    queueSenders: [
      orderedWritesQueueName
    ]
    queueReceivers: []
    subscriptionReceivers: []
    tableWriter: false
  }
  {
    role: 'consumer-high'
    maximumInstanceCount: consumerHighMaximumInstanceCount
    maxConcurrentCalls: consumerHighMaxConcurrentCalls
    maxConcurrentSessions: hostJsonMaxConcurrentSessions
    topicSenders: []
    queueSenders: [
      levelingQueueName
    ]
    queueReceivers: []
    subscriptionReceivers: [
      {
        topic: priorityTopicName
        subscription: highPrioritySubscriptionName
      }
    ]
    tableWriter: false
  }
  {
    role: 'consumer-low'
    maximumInstanceCount: consumerLowMaximumInstanceCount
    maxConcurrentCalls: consumerLowMaxConcurrentCalls
    maxConcurrentSessions: hostJsonMaxConcurrentSessions
    topicSenders: []
    queueSenders: [
      levelingQueueName
    ]
    queueReceivers: []
    subscriptionReceivers: [
      {
        topic: priorityTopicName
        subscription: lowPrioritySubscriptionName
      }
    ]
    tableWriter: false
  }
  {
    role: 'leveler'
    maximumInstanceCount: levelerMaximumInstanceCount
    maxConcurrentCalls: levelerMaxConcurrentCalls
    maxConcurrentSessions: hostJsonMaxConcurrentSessions
    topicSenders: []
    queueSenders: []
    queueReceivers: [
      levelingQueueName
    ]
    subscriptionReceivers: []
    tableWriter: true
  }
  {
    // Message groups: one session per tenant, one instance per session at a time.
    role: 'ordered'
    maximumInstanceCount: orderedMaximumInstanceCount
    maxConcurrentCalls: orderedMaxConcurrentCalls
    maxConcurrentSessions: orderedMaxConcurrentSessions
    topicSenders: []
    queueSenders: []
    queueReceivers: [
      orderedWritesQueueName
    ]
    subscriptionReceivers: []
    tableWriter: true
  }
]

resource rg 'Microsoft.Resources/resourceGroups@2025-04-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    location: location
    tags: tags
    logAnalyticsName: 'log-${resourceToken}'
    applicationInsightsName: 'appi-${resourceToken}'
  }
}

// The pattern's monitoring: latency per priority against its SLO, backlog, poison, writes at the cap.
module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    location: location
    tags: tags
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    serviceBusNamespaceName: serviceBus.outputs.name
    topicName: priorityTopicName
    levelingQueueName: levelingQueueName
    sloHighSeconds: sloHighSeconds
    sloLowSeconds: sloLowSeconds
    topicBacklogThreshold: topicBacklogAlertThreshold
    levelerMaxWritesPerSecond: levelerMaxWritesPerSecond
    alertEmail: alertEmail
  }
}

module workbook 'modules/workbook.bicep' = {
  name: 'workbook'
  scope: rg
  params: {
    location: location
    tags: tags
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    serviceBusNamespaceName: serviceBus.outputs.name
    sloHighSeconds: sloHighSeconds
    sloLowSeconds: sloLowSeconds
    levelerMaxWritesPerSecond: levelerMaxWritesPerSecond
  }
}

module serviceBus 'modules/servicebus.bicep' = {
  name: 'servicebus'
  scope: rg
  params: {
    location: location
    tags: tags
    namespaceName: 'sb-${resourceToken}'
    entities: serviceBusEntities
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    location: location
    tags: tags
    name: 'st${resourceToken}'
    tableName: resultsTableName
    budgetTableName: levelerBudgetTableName
    deploymentContainerNames: [for app in functionApps: 'deploy-${app.role}']
  }
}

module apps 'modules/functionapp.bicep' = [for app in functionApps: {
  name: 'func-${app.role}'
  scope: rg
  params: {
    name: 'func-${app.role}-${resourceToken}'
    planName: 'plan-${app.role}-${resourceToken}'
    location: location
    tags: union(tags, {
      'azd-service-name': app.role
    })
    storageAccountName: storage.outputs.name
    deploymentContainerName: 'deploy-${app.role}'
    maximumInstanceCount: app.maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    appSettings: {
      APP_ROLES: app.role
      AzureFunctionsJobHost__extensions__serviceBus__maxConcurrentCalls: string(app.maxConcurrentCalls)
      AzureFunctionsJobHost__extensions__serviceBus__maxConcurrentSessions: string(app.maxConcurrentSessions)
      ServiceBusConnection__fullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
      AzureWebJobsStorage__accountName: storage.outputs.name
      AzureWebJobsStorage__credential: 'managedidentity'
      TableStorageConnection__tableServiceUri: storage.outputs.tableEndpoint
      RESULTS_TABLE: resultsTableName
      SENDER_SCHEDULE: senderSchedule
      SENDER_BATCH_SIZE: string(senderBatchSize)
      CONSUMER_WORK_MS_HIGH: string(consumerWorkMsHigh)
      CONSUMER_WORK_MS_LOW: string(consumerWorkMsLow)
      LEVELER_MAX_WRITES_PER_SECOND: string(levelerMaxWritesPerSecond)
      LEVELER_BUDGET_TABLE: levelerBudgetTableName
      ORDERED_TABLE: orderedTableName
      ORDERED_WORK_MS: string(orderedWorkMs)
      PRIORITY_STRATEGY: priorityStrategy
      AGING_AFTER_SECONDS: string(agingAfterSeconds)
      SLO_HIGH_SECONDS: string(sloHighSeconds)
      SLO_LOW_SECONDS: string(sloLowSeconds)
      STRICT_MAX_HOLD_SECONDS: '240'
      APPLICATIONINSIGHTS_CONNECTION_STRING: monitoring.outputs.applicationInsightsConnectionString
      APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'Authorization=AAD'
    }
  }
}]

// Least privilege: each identity gets Sender/Receiver on the single topic, subscription or queue its
// role uses, never on the namespace.
module serviceBusRoles 'modules/servicebus-roles.bicep' = [for (app, i) in functionApps: {
  name: 'sb-roles-${app.role}'
  scope: rg
  params: {
    namespaceName: serviceBus.outputs.name
    principalId: apps[i].outputs.principalId
    topicSenders: app.topicSenders
    queueSenders: app.queueSenders
    queueReceivers: app.queueReceivers
    subscriptionReceivers: app.subscriptionReceivers
  }
}]

module strategyServiceBusRoles 'modules/servicebus-roles.bicep' = [for (grant, i) in strategyGrants[priorityStrategy]: {
  name: 'sb-roles-strategy-${i}'
  scope: rg
  params: {
    namespaceName: serviceBus.outputs.name
    principalId: apps[grant.app].outputs.principalId
    topicSenders: grant.topicSenders
    queueSenders: grant.queueSenders
    queueReceivers: grant.queueReceivers
    subscriptionReceivers: grant.subscriptionReceivers
  }
}]

// The session-queue demos (leader election, ordered writes) and the load generator are CLIs; with local
// auth disabled, a developer who runs them against Azure needs these data roles, nothing more.
module developerServiceBusRoles 'modules/servicebus-roles.bicep' = if (!empty(developerPrincipalId)) {
  name: 'sb-roles-developer'
  scope: rg
  params: {
    namespaceName: serviceBus.outputs.name
    principalId: developerPrincipalId
    principalType: developerPrincipalType
    topicSenders: [
      priorityTopicName
    ]
    queueSenders: sessionQueueNames
    queueReceivers: sessionQueueNames
    subscriptionReceivers: []
  }
}

// Every app needs blob access for AzureWebJobsStorage and its Flex Consumption deployment container;
// only the leveler and the ordered writer write to tables.
module storageRoles 'modules/storage-roles.bicep' = [for (app, i) in functionApps: {
  name: 'st-roles-${app.role}'
  scope: rg
  params: {
    storageAccountName: storage.outputs.name
    principalId: apps[i].outputs.principalId
    grantTableDataContributor: app.tableWriter
  }
}]

// Application Insights accepts only Entra ID authenticated telemetry (disableLocalAuth).
module monitoringRoles 'modules/monitoring-roles.bicep' = [for (app, i) in functionApps: {
  name: 'appi-roles-${app.role}'
  scope: rg
  params: {
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    principalId: apps[i].outputs.principalId
  }
}]

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output SERVICEBUS_NAMESPACE_NAME string = serviceBus.outputs.name
output SERVICEBUS_FULLY_QUALIFIED_NAMESPACE string = serviceBus.outputs.fullyQualifiedNamespace
output STORAGE_ACCOUNT_NAME string = storage.outputs.name
output TABLE_SERVICE_URI string = storage.outputs.tableEndpoint
output RESULTS_TABLE string = resultsTableName
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.applicationInsightsName
output FUNCTION_APP_NAMES array = [for (app, i) in functionApps: apps[i].outputs.name]
output SERVICE_SENDER_NAME string = apps[0].outputs.name
output SERVICE_CONSUMER_HIGH_NAME string = apps[1].outputs.name
output SERVICE_CONSUMER_LOW_NAME string = apps[2].outputs.name
output SERVICE_LEVELER_NAME string = apps[3].outputs.name
output SERVICE_ORDERED_NAME string = apps[4].outputs.name
output ORDERED_TABLE string = orderedTableName
output PRIORITY_STRATEGY string = priorityStrategy
output WORKBOOK_ID string = workbook.outputs.workbookId
