// Log Analytics and a workspace-based Application Insights that only accepts Entra ID authenticated
// telemetry (each Function App's identity gets Monitoring Metrics Publisher in monitoring-roles.bicep).

param location string
param tags object = {}
param logAnalyticsName string
param applicationInsightsName string

@minValue(30)
param retentionInDays int = 30

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2025-07-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    DisableLocalAuth: true
  }
}

output applicationInsightsName string = applicationInsights.name
// Not a secret once DisableLocalAuth is set: the key in it no longer authorizes ingestion on its own.
output applicationInsightsConnectionString string = applicationInsights.properties.ConnectionString
output logAnalyticsId string = logAnalytics.id
