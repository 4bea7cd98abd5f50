"""The alerts and the workbook (infra/modules/alerts.bicep, workbook.bicep) pass ``infra.check`` against the
azure-mgmt-monitor and azure-mgmt-applicationinsights models of their API versions, and a mistake in
them fails it: a misspelt property, a wrong type, a value outside an enum, a criterion's subtype picked by
its ``odata.type`` / ``criterionType`` discriminator. ARM itself cannot be reached from here: the SDK
models stand in for it, as for the rest of infra/ (tests/unit/test_infra_check.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.check import check
from tests.unit.test_infra_check import INFRA, ROOT, edited_line, infra_copy, messages


def test_the_monitoring_resources_are_checked_and_pass() -> None:
    found = messages(check([INFRA / "main.bicep"], root=ROOT))
    assert found == []
    text = (INFRA / "main.bicep").read_text()
    assert "module alerts 'modules/alerts.bicep'" in text and "module workbook 'modules/workbook.bicep'" in text


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        pytest.param(
            "modules/alerts.bicep", "    evaluationFrequency: 'PT5M'\n    windowSize: 'PT5M'\n    criteria: {\n",
            "    evaluationFrequncy: 'PT5M'\n    windowSize: 'PT5M'\n    criteria: {\n",
            "modules/alerts.bicep:{line}: latencyAlerts (Microsoft.Insights/scheduledQueryRules) "
            "properties.evaluationFrequncy: unknown property: ScheduledQueryRuleResource.properties has no "
            "'evaluationFrequncy'; did you mean 'evaluationFrequency'?",
            id="misspelt-log-alert-property",
        ),
        pytest.param(
            "modules/alerts.bicep", "          threshold: topicBacklogThreshold", "          threshold: 'lots'",
            "modules/alerts.bicep:{line}: backlogAlert (Microsoft.Insights/metricAlerts) "
            "properties.criteria.allOf[0].threshold: wrong type: expects number, got string 'lots'",
            id="wrong-type-inside-a-polymorphic-criterion",
        ),
        pytest.param(
            "modules/alerts.bicep", "          timeAggregation: 'Average'", "          timeAggregation: 'Mean'",
            "modules/alerts.bicep:{line}: backlogAlert (Microsoft.Insights/metricAlerts) "
            "properties.criteria.allOf[0].timeAggregation: 'Mean' is not a value of AggregationTypeEnum in this API "
            "version (allowed: Average, Count, Minimum, Maximum, Total)",
            id="metric-aggregation-outside-the-enum",
        ),
        pytest.param(
            "modules/alerts.bicep", "'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'",
            "'odata.type': 'Microsoft.Azure.Monitor.SingleResourceCriteria'",
            "modules/alerts.bicep:{line}: backlogAlert (Microsoft.Insights/metricAlerts) "
            "properties.criteria.odata.type: 'Microsoft.Azure.Monitor.SingleResourceCriteria' is not a subtype of "
            "MetricAlertCriteria in this API "
            "version (known: Microsoft.Azure.Monitor.MultipleResourceMultipleMetricCriteria, "
            "Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria, "
            "Microsoft.Azure.Monitor.WebtestLocationAvailabilityCriteria)",
            id="unknown-criteria-subtype",
        ),
        pytest.param(
            "modules/alerts.bicep", "  kind: 'LogAlert'", "  kind: 'LogAlerts'",
            "modules/alerts.bicep:{line}: latencyAlerts (Microsoft.Insights/scheduledQueryRules) kind: 'LogAlerts' is "
            "not a value of Kind in this API version (allowed: LogAlert, LogToMetric)",
            id="log-alert-kind-outside-the-enum",
        ),
        pytest.param(
            "modules/workbook.bicep", "    serializedData: string(content)", "    serializedData: 42",
            "modules/workbook.bicep:{line}: workbook (Microsoft.Insights/workbooks) properties.serializedData: wrong "
            "type: expects string, got int 42",
            id="workbook-content-not-a-string",
        ),
        pytest.param(
            "modules/workbook.bicep", "    category: 'workbook'", "    categroy: 'workbook'",
            "modules/workbook.bicep:{line}: workbook (Microsoft.Insights/workbooks) properties.categroy: unknown "
            "property: Workbook.properties has no 'categroy'; did you mean 'category'?",
            id="misspelt-workbook-property",
        ),
        pytest.param(
            "modules/alerts.bicep", "Microsoft.Insights/metricAlerts@2018-03-01' = {\n  name: 'alert-backlog",
            "Microsoft.Insights/metricAlerts@2024-01-01' = {\n  name: 'alert-backlog",
            "modules/alerts.bicep:{line}: backlogAlert (Microsoft.Insights/metricAlerts): API version 2024-01-01 of "
            "Microsoft.Insights/metricAlerts is in no installed SDK (azure-mgmt-monitor models 2018-03-01)",
            id="alert-api-version-the-sdk-does-not-model",
        ),
    ],
)
def test_a_mistake_in_the_monitoring_resources_fails_the_check(tmp_path: Path, file: str, old: str, new: str,
                                                                expected: str) -> None:
    found = messages(infra_copy(tmp_path, file, old, new))
    assert f"infra/{expected.format(line=edited_line(file, old, new))}" in found, "\n".join(found)


@pytest.mark.parametrize("strategy", ["shared", "strict", "aging", "fifo"])
def test_every_strategy_deploys_from_the_same_bicep(tmp_path: Path, strategy: str) -> None:
    """``priorityStrategy`` switches what the consumer apps receive and send (per-strategy grants); every
    value must pass the check as the default does."""
    found = messages(infra_copy(tmp_path, "main.bicep", "param priorityStrategy string = 'separate'",
                                f"param priorityStrategy string = '{strategy}'"))
    assert found == []
