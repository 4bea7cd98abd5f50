// What the Priority Queue pattern asks to monitor, as alerts: each priority's latency against its SLO,
// the backlog waiting on the topic, poison in the leveling queue, and the leveler running at its write
// cap for long (the store is the bottleneck: raise the cap or accept the lag).
//
// Latency and writes come from the pipeline's own telemetry: every consumer and the leveler log one line
// per message, `latency stage=<function> priority=<High|Low> ms=<end-to-end ms> message_id=<id>`
// (shared/telemetry.py), which the Functions host forwards to Application Insights as a trace. The
// queries parse it; `itemCount` undoes the host's adaptive sampling in counts. Backlog and dead-letters
// are Service Bus platform metrics, whose finest dimension is the queue or topic (EntityName).

param location string
param tags object = {}
param applicationInsightsName string
param serviceBusNamespaceName string
param topicName string
param levelingQueueName string

@minValue(1)
@description('Target end-to-end latency of high-priority messages, in seconds.')
param sloHighSeconds int

@minValue(1)
@description('Target end-to-end latency of low-priority messages, in seconds.')
param sloLowSeconds int

@minValue(1)
@description('Active messages on the topic (all its subscriptions) above which the backlog alert fires.')
param topicBacklogThreshold int

@minValue(1)
@description('The leveler app\'s write cap (LEVELER_MAX_WRITES_PER_SECOND).')
param levelerMaxWritesPerSecond int

@description('Optional e-mail address the alerts notify (an action group). Empty: the alerts fire in the portal only.')
param alertEmail string = ''

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource namespace 'Microsoft.ServiceBus/namespaces@2026-01-01' existing = {
  name: serviceBusNamespaceName
}

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmail)) {
  name: 'ag-pipeline'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'pipeline'
    enabled: true
    emailReceivers: [
      {
        name: 'owner'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var actionGroupIds = empty(alertEmail) ? [] : [
  actionGroup.id
]
var metricAlertActions = [for id in actionGroupIds: {
  actionGroupId: id
}]

// One row per processed message: stage (the function), priority, latency in ms.
var latencyTraces = 'traces | where message startswith "latency stage=" | parse message with "latency stage=" stage " priority=" priority " ms=" ms:real " message_id=" * | where stage != "stored"'

var priorities = [
  {
    name: 'High'
    sloSeconds: sloHighSeconds
    severity: 1
  }
  {
    name: 'Low'
    sloSeconds: sloLowSeconds
    severity: 3
  }
]

resource latencyAlerts 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [for p in priorities: {
  name: 'alert-latency-${toLower(p.name)}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: '${p.name}-priority p95 latency over its ${p.sloSeconds} s SLO'
    description: 'The 95th percentile of end-to-end latency (created to processed) of ${p.name}-priority messages exceeded SLO_${toUpper(p.name)}_SECONDS over 5 minutes.'
    severity: p.severity
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: '${latencyTraces} | where priority == "${p.name}" | summarize p95 = percentile(ms, 95)'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'p95'
          operator: 'GreaterThan'
          threshold: p.sloSeconds * 1000
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroupIds
    }
  }
}]

resource writesAtCapAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-leveler-at-cap'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Leveler writing at its cap for 15 minutes'
    description: 'Table writes stayed at 90 % or more of LEVELER_MAX_WRITES_PER_SECOND for three 5-minute windows in a row: the leveling queue is absorbing more than the store is allowed to take.'
    severity: 3
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          // writes in the 5-minute window against 90 % of the cap over 300 s
          query: 'traces | where message startswith "latency stage=stored " | summarize writes = sum(itemCount)'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'writes'
          operator: 'GreaterThanOrEqual'
          threshold: levelerMaxWritesPerSecond * 270
          failingPeriods: {
            numberOfEvaluationPeriods: 3
            minFailingPeriodsToAlert: 3
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

resource backlogAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'alert-backlog-${topicName}'
  location: 'global'
  tags: tags
  properties: {
    description: 'Active messages on topic ${topicName} (its subscriptions together: Service Bus metrics stop at the topic) above ${topicBacklogThreshold} for 5 minutes.'
    severity: 2
    enabled: true
    scopes: [
      namespace.id
    ]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'TopicBacklog'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'ActiveMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                topicName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: topicBacklogThreshold
          timeAggregation: 'Average'
        }
      ]
    }
    autoMitigate: true
    actions: metricAlertActions
  }
}

resource deadLetterAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'alert-deadletters-${levelingQueueName}'
  location: 'global'
  tags: tags
  properties: {
    description: 'Dead-lettered messages in queue ${levelingQueueName}: poison (with its reason) or work that failed MaxDeliveryCount times. Inspect and resubmit or discard.'
    severity: 2
    enabled: true
    scopes: [
      namespace.id
    ]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'LevelingDeadLetters'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                levelingQueueName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    autoMitigate: true
    actions: metricAlertActions
  }
}

output alertNames array = [
  latencyAlerts[0].name
  latencyAlerts[1].name
  writesAtCapAlert.name
  backlogAlert.name
  deadLetterAlert.name
]
