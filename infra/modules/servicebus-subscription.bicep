// One subscription of servicebus.json and its filter rules.
//
// ARM gives a new subscription a "$Default" rule (TrueFilter, 1=1) and removes it when the first rule of
// our own is added, so after deployment only the SQL filters from servicebus.json remain.

param namespaceName string
param topicName string

@description('One entry of Subscriptions from servicebus.json: { Name, Properties, Rules }.')
param subscription object

resource namespace 'Microsoft.ServiceBus/namespaces@2026-01-01' existing = {
  name: namespaceName
}

resource topic 'Microsoft.ServiceBus/namespaces/topics@2026-01-01' existing = {
  parent: namespace
  name: topicName
}

resource subscriptionResource 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2026-01-01' = {
  parent: topic
  name: subscription.Name
  properties: {
    lockDuration: subscription.Properties.?LockDuration
    maxDeliveryCount: subscription.Properties.?MaxDeliveryCount
    requiresSession: subscription.Properties.?RequiresSession
    defaultMessageTimeToLive: subscription.Properties.?DefaultMessageTimeToLive
    deadLetteringOnMessageExpiration: subscription.Properties.?DeadLetteringOnMessageExpiration
    forwardTo: empty(subscription.Properties.?ForwardTo ?? '') ? null : subscription.Properties.ForwardTo
    forwardDeadLetteredMessagesTo: empty(subscription.Properties.?ForwardDeadLetteredMessagesTo ?? '') ? null : subscription.Properties.ForwardDeadLetteredMessagesTo
  }
}

// Config.json's FilterType is 'Sql' or 'Correlation'; ARM's is 'SqlFilter' or 'CorrelationFilter'.
// union() keeps the filter kind that is not used out of the request instead of sending it as null.
resource rules 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2026-01-01' = [for rule in (subscription.?Rules ?? []): {
  parent: subscriptionResource
  name: rule.Name
  properties: union(rule.Properties.FilterType == 'Sql' ? {
    filterType: 'SqlFilter'
    sqlFilter: {
      sqlExpression: rule.Properties.SqlFilter.SqlExpression
    }
  } : {
    filterType: 'CorrelationFilter'
    correlationFilter: {
      contentType: rule.Properties.?CorrelationFilter.?ContentType
      correlationId: rule.Properties.?CorrelationFilter.?CorrelationId
      label: rule.Properties.?CorrelationFilter.?Label
      messageId: rule.Properties.?CorrelationFilter.?MessageId
      replyTo: rule.Properties.?CorrelationFilter.?ReplyTo
      replyToSessionId: rule.Properties.?CorrelationFilter.?ReplyToSessionId
      sessionId: rule.Properties.?CorrelationFilter.?SessionId
      to: rule.Properties.?CorrelationFilter.?To
      properties: rule.Properties.?CorrelationFilter.?Properties
    }
  }, empty(rule.Properties.?Action.?SqlExpression ?? '') ? {} : {
    action: {
      sqlExpression: rule.Properties.Action.SqlExpression
    }
  })
}]

output name string = subscriptionResource.name
