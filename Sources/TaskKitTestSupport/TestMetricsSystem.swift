import Metrics
import MetricsTestKit

/// The test process's one `TestMetrics`, bootstrapped as the `MetricsSystem` on first use.
///
/// `MetricsSystem.bootstrap` may run once per process, and every test target of the package
/// runs in one process, in parallel: tests read this instance, give each component under test a
/// `metricsLabel` of its own, and read only the metrics with that label. Touch it before
/// creating the component, which makes its metric objects through the system bootstrapped then.
public let processTestMetrics: TestMetrics = {
    let metrics = TestMetrics()
    MetricsSystem.bootstrap(metrics)
    return metrics
}()
