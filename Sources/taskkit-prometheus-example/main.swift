#if Examples
// Runs a small workload through a MonoTask, a KeyedMonoTask and a TaskManager, each with a
// `metricsLabel`, and prints the metrics in Prometheus text format while it runs and at the end.
//
//     swift run taskkit-prometheus-example [rounds]
//
// A server would serve `registry.emitToString()` on /metrics instead of printing it.
import Metrics
import Prometheus
import TaskKit

let registry = PrometheusCollectorRegistry()
MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

struct Flaky: Error {}

let rounds = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 3
let configuration = MonoTask<Int>(
    resultExpireDuration: .milliseconds(50), clock: ContinuousClock(), metricsLabel: "configuration"
) {
    try? await Task.sleep(for: .milliseconds(5))
    return .success(42)
}
let profiles = KeyedMonoTask<Int, String>(
    maximumEntries: 8, resultExpireDuration: .seconds(60), metricsLabel: "profiles"
) { id in
    try await Task.sleep(for: .milliseconds(2))
    if id % 7 == 6 { throw Flaky() }
    return "profile \(id)"
}
let jobs = TaskManager(maximumConcurrentTasks: 2, metricsLabel: "jobs")

for round in 1...rounds {
    await withTaskGroup(of: Void.self) { group in
        for caller in 0..<50 {
            group.addTask { _ = await configuration.asyncExecute() }
            group.addTask { _ = try? await profiles.value(for: (round * 50 + caller) % 12) }
        }
        for job in 0..<10 {
            group.addTask {
                _ = try? await jobs.value(timeout: .milliseconds(50)) {
                    try await Task.sleep(for: .milliseconds(job == 9 ? 200 : 5))
                    if job == 8 { throw Flaky() }
                    return job
                }
            }
        }
    }
    print("# after round \(round) of \(rounds)")
    print(registry.emitToString())
}

#else
import Foundation

FileHandle.standardError.write(Data("taskkit-prometheus-example needs the package trait Examples: swift run --enable-all-traits taskkit-prometheus-example\n".utf8))
exit(1)
#endif
