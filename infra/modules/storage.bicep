// The storage account every Function App uses for AzureWebJobsStorage (timer leases, host state), one
// blob container per app for its Flex Consumption deployment package, and the results table the
// leveling worker writes to. Keys are disabled: only identities with data roles get in.

param name string
param location string
param tags object = {}

@description('Azure Table the leveling worker writes to.')
param tableName string

@minLength(3)
@maxLength(63)
@description('Name of the table that holds the leveler\'s shared write budget.')
param budgetTableName string = 'writebudget'

@description('One Flex Consumption deployment container per Function App.')
param deploymentContainerNames array

resource storage 'Microsoft.Storage/storageAccounts@2026-09-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    dnsEndpointType: 'Standard'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2026-09-01' = {
  parent: storage
  name: 'default'
}

resource deploymentContainers 'Microsoft.Storage/storageAccounts/blobServices/containers@2026-09-01' = [for containerName in deploymentContainerNames: {
  parent: blobService
  name: containerName
  properties: {
    publicAccess: 'None'
  }
}]

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2026-09-01' = {
  parent: storage
  name: 'default'
}

resource resultsTable 'Microsoft.Storage/storageAccounts/tableServices/tables@2026-09-01' = {
  parent: tableService
  name: tableName
}

// One entity: the clock of write slots the leveler instances lease (shared/write_budget.py).
resource budgetTable 'Microsoft.Storage/storageAccounts/tableServices/tables@2026-09-01' = {
  parent: tableService
  name: budgetTableName
}

output name string = storage.name
output id string = storage.id
output blobEndpoint string = storage.properties.primaryEndpoints.blob
output tableEndpoint string = storage.properties.primaryEndpoints.table
