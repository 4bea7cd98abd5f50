// One Function App on its own Flex Consumption plan (a Flex plan holds a single app), with a
// system-assigned identity that is used for the deployment container, AzureWebJobsStorage, Service Bus,
// Table Storage and Application Insights. Role assignments live in the *-roles.bicep modules.

param name string
param planName string
param location string
param tags object = {}

@description('Storage account holding AzureWebJobsStorage and the deployment container.')
param storageAccountName string

@description('Blob container (in storageAccountName) that receives this app\'s deployment package.')
param deploymentContainerName string

@minValue(1)
@maxValue(1000)
@description('Upper bound on instances per function scale group: the per-role scale-out limit.')
param maximumInstanceCount int

@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@allowed([
  '3.10'
  '3.11'
  '3.12'
])
param pythonVersion string = '3.11'

@description('App settings (APP_ROLES, connection settings, tuning knobs).')
param appSettings object

resource storage 'Microsoft.Storage/storageAccounts@2026-09-01' existing = {
  name: storageAccountName
}

resource plan 'Microsoft.Web/serverfarms@2025-05-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource site 'Microsoft.Web/sites@2025-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'SystemAssigned'
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storage.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'SystemAssignedIdentity'
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'python'
        version: pythonVersion
      }
    }
  }

  // Flex Consumption takes the runtime from functionAppConfig: FUNCTIONS_WORKER_RUNTIME and
  // FUNCTIONS_EXTENSION_VERSION must not be set here.
  resource settings 'config' = {
    name: 'appsettings'
    properties: appSettings
  }
}

output name string = site.name
output id string = site.id
output principalId string = site.identity.principalId
output defaultHostName string = site.properties.defaultHostName
