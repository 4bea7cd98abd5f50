// An Azure Workbook with what the Priority Queue pattern asks to watch: latency per priority against its
// SLO, the backlogs, instances per app, and the leveler's writes against its cap. Latency, instances
// and writes come from Application Insights traces (the pipeline's `latency stage=...` lines; an
// instance is a distinct cloud_RoleInstance of an app's cloud_RoleName); the backlogs from the Service
// Bus namespace's ActiveMessages and DeadletteredMessages metrics, split by entity.

param location string
param tags object = {}
param applicationInsightsName string
param serviceBusNamespaceName string

@minValue(1)
param sloHighSeconds int

@minValue(1)
param sloLowSeconds int

@minValue(1)
param levelerMaxWritesPerSecond int

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource namespace 'Microsoft.ServiceBus/namespaces@2026-01-01' existing = {
  name: serviceBusNamespaceName
}

var latencyTraces = 'traces | where message startswith "latency stage=" | parse message with "latency stage=" stage " priority=" priority " ms=" ms:real " message_id=" *'
var slo = 'extend slo_ms = iff(priority == "High", ${sloHighSeconds * 1000}, ${sloLowSeconds * 1000})'

var content = {
  version: 'Notebook/1.0'
  items: [
    {
      type: 1
      name: 'intro'
      content: {
        json: '## Messaging pipeline\nEnd-to-end latency per priority against its SLO (high ${sloHighSeconds} s, low ${sloLowSeconds} s), backlogs, instances per app, and the leveler\'s writes against its cap of ${levelerMaxWritesPerSecond}/s.'
      }
    }
    {
      type: 3
      name: 'latency'
      content: {
        version: 'KqlItem/1.0'
        title: 'p95 latency per priority (ms) and its SLO'
        query: '${latencyTraces} | where stage != "stored" | ${slo} | summarize p95_ms = percentile(ms, 95), slo_ms = max(slo_ms) by priority, bin(timestamp, 1m) | render timechart'
        size: 0
        queryType: 0
        resourceType: 'microsoft.insights/components'
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'slo'
      content: {
        version: 'KqlItem/1.0'
        title: 'SLO compliance per priority'
        query: '${latencyTraces} | where stage != "stored" | ${slo} | summarize messages = sum(itemCount), within_slo = sumif(itemCount, ms <= slo_ms), p50_ms = percentile(ms, 50), p95_ms = percentile(ms, 95), p99_ms = percentile(ms, 99) by priority | extend compliance = round(100.0 * within_slo / messages, 2)'
        size: 0
        queryType: 0
        resourceType: 'microsoft.insights/components'
        visualization: 'table'
      }
    }
    {
      type: 10
      name: 'backlogs'
      content: {
        version: 'MetricsItem/2.0'
        title: 'Backlogs: active and dead-lettered messages per queue or topic'
        size: 0
        chartType: 2
        resourceType: 'microsoft.servicebus/namespaces'
        metricScope: 0
        resourceIds: [
          namespace.id
        ]
        timeContext: {
          durationMs: 3600000
        }
        metrics: [
          {
            namespace: 'microsoft.servicebus/namespaces'
            metric: 'microsoft.servicebus/namespaces--ActiveMessages'
            aggregation: 3
            splitBy: 'EntityName'
          }
          {
            namespace: 'microsoft.servicebus/namespaces'
            metric: 'microsoft.servicebus/namespaces--DeadletteredMessages'
            aggregation: 3
            splitBy: 'EntityName'
          }
        ]
      }
    }
    {
      type: 3
      name: 'instances'
      content: {
        version: 'KqlItem/1.0'
        title: 'Instances per app (distinct role instances that logged, per minute)'
        query: 'union traces, requests | summarize instances = dcount(cloud_RoleInstance) by cloud_RoleName, bin(timestamp, 1m) | render timechart'
        size: 0
        queryType: 0
        resourceType: 'microsoft.insights/components'
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'writes'
      content: {
        version: 'KqlItem/1.0'
        title: 'Leveler table writes per second against the cap'
        query: 'traces | where message startswith "latency stage=stored " | summarize writes_per_second = todouble(sum(itemCount)) / 60.0 by bin(timestamp, 1m) | extend cap = ${levelerMaxWritesPerSecond} | render timechart'
        size: 0
        queryType: 0
        resourceType: 'microsoft.insights/components'
        visualization: 'timechart'
      }
    }
  ]
}

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(resourceGroup().id, 'messaging-pipeline-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'Messaging pipeline: priorities, backlogs, instances, writes'
    category: 'workbook'
    sourceId: applicationInsights.id
    serializedData: string(content)
  }
}

output workbookId string = workbook.id
