#if Examples
import Foundation
import TaskKit

extension Scenario {
    /// TaskStore: a search-as-you-type burst under .cancelPrevious, then the other behaviours.
    static let taskStore = Scenario(name: "taskstore", title: "TaskStore — search as you type") { context, record in
        let outcome = try await TaskStoreDemo(context: context).run()
        record.measure("search burst", "20 queries typed: \(outcome.cancelled) cancelled, \(outcome.completed) completed, last shown: '\(outcome.shown)'")
        record.expect("cancelled searches", outcome.cancelled, equals: 19)
        record.expect("completed searches", outcome.completed, equals: 1)
        record.expect("the result shown is for the last query", outcome.shown, equals: TaskStoreDemo.typed)
        record.expect(".preferPrevious runs the operation once", outcome.preferPreviousRuns, equals: 1)
        record.expect(".wait runs both, one after the other", outcome.waitOrder, equals: "first,second")
        record.expect(".runConcurrently overlaps both", outcome.concurrentPeak, equals: 2)
        record.expect(".cancelPrevious(wait: true) starts after the previous ended", outcome.cancelAndWaitOrder, equals: "first cancelled,second")
        record.expect("no key running at the end", outcome.runningAtEnd, equals: 0)
        record.compare(
            "taskstore", workload: "20 keystrokes of a search", counted: "search results handled",
            naive: Comparison.Run(count: outcome.naiveCompleted, seconds: outcome.naiveSeconds),
            taskKit: Comparison.Run(count: outcome.completed, seconds: outcome.burstSeconds)
        )
    }
}

/// The TaskStore part of the demo, isolated to the main actor like a UI model.
@MainActor
final class TaskStoreDemo {
    struct Outcome: Sendable {
        var cancelled = 0
        var completed = 0
        var shown = ""
        var preferPreviousRuns = 0
        var waitOrder = ""
        var concurrentPeak = 0
        var cancelAndWaitOrder = ""
        var runningAtEnd = 0
        var burstSeconds = 0.0
        var naiveCompleted = 0
        var naiveSeconds = 0.0
    }

    /// What the user types; the demo replays its last 20 keystrokes.
    nonisolated static let typed = "structured concurrency"

    let context: DemoContext
    let store = TaskStore<String>()
    var outcome = Outcome()

    init(context: DemoContext) {
        self.context = context
    }

    /// Polls a main-actor condition for up to five seconds while real work finishes.
    func settle(_ condition: () -> Bool) async {
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        while !condition() && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    func run() async throws -> Outcome {
        // Typing "swift concurrency" one keystroke at a time: each keystroke starts a search and
        // cancels the previous one.
        let typed = Self.typed
        let log = EventLog()
        let burstStart = ContinuousClock.now
        var last: Task<Void, Never>?
        for length in (typed.count - 19)...typed.count {  // 20 keystrokes
            let query = String(typed.prefix(length))
            last = store.addTask(forKey: "search", duplicateKeyBehavior: .cancelPrevious(wait: false)) { [context] in
                do {
                    let (data, _) = try await context.fetch("/search?q=\(query.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? query)")
                    try Task.checkCancellation()
                    await log.record("completed:\(query):\(data.count)")
                } catch {
                    await log.record("cancelled:\(query)")
                }
            }
        }
        await last?.value
        await settle { self.store.runningKeys.isEmpty }
        outcome.burstSeconds = burstStart.duration(to: .now).seconds
        let events = await log.events
        outcome.cancelled = events.filter { $0.hasPrefix("cancelled:") }.count
        outcome.completed = events.filter { $0.hasPrefix("completed:") }.count
        outcome.shown = events.first { $0.hasPrefix("completed:") }?.split(separator: ":")[1].description ?? ""

        // .preferPrevious: a second add while the first runs returns the first; one run.
        let runs = EventLog()
        let gate = CoPromise<Void>()
        store.addTask(forKey: "prefer") { await runs.record("run"); _ = try? await gate.value }
        store.addTask(forKey: "prefer", duplicateKeyBehavior: .preferPrevious) { await runs.record("run") }
        gate.success(())
        await settle { !self.store.taskIsRunning(forKey: "prefer") }
        outcome.preferPreviousRuns = await runs.events.count

        // .wait: the second waits for the first without cancelling it.
        let order = EventLog()
        store.addTask(forKey: "wait") { try? await Task.sleep(for: .milliseconds(50)); await order.record("first") }
        let second = store.addTask(forKey: "wait", duplicateKeyBehavior: .wait) { await order.record("second") }
        await second.value
        outcome.waitOrder = await order.events.joined(separator: ",")

        // .runConcurrently: both run at the same time under one key.
        let peak = PeakCounter()
        let release = CoPromise<Void>()
        for _ in 0..<2 {
            store.addTask(forKey: "concurrent", duplicateKeyBehavior: .runConcurrently) {
                await peak.enter()
                _ = try? await release.value
                await peak.leave()
            }
        }
        await waitUntil { [peak] in peak.currentPeak() >= 2 }
        release.success(())
        await settle { !self.store.taskIsRunning(forKey: "concurrent") }
        outcome.concurrentPeak = peak.currentPeak()

        // .cancelPrevious(wait: true): cancel the first, wait for it to end, then run.
        let cancelOrder = EventLog()
        store.addTask(forKey: "cancelwait") {
            do { try await Task.sleep(for: .seconds(10)) } catch { await cancelOrder.record("first cancelled") }
        }
        let replacement = store.addTask(forKey: "cancelwait", duplicateKeyBehavior: .cancelPrevious(wait: true)) {
            await cancelOrder.record("second")
        }
        await replacement.value
        outcome.cancelAndWaitOrder = await cancelOrder.events.joined(separator: ",")
        outcome.runningAtEnd = store.runningKeys.count

        // The same 20 keystrokes without TaskStore: every search runs to its end and its results
        // are handled, in whatever order they arrive.
        let naiveLog = EventLog()
        let naiveStart = ContinuousClock.now
        var searches: [Task<Void, Never>] = []
        for length in (typed.count - 19)...typed.count {
            let query = String(typed.prefix(length))
            searches.append(Task { [context] in
                let path = "/search?q=\(query.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? query)"
                if let (data, _) = try? await context.fetch(path) {
                    await naiveLog.record("completed:\(query):\(data.count)")
                }
            })
        }
        for search in searches { await search.value }
        outcome.naiveSeconds = naiveStart.duration(to: .now).seconds
        outcome.naiveCompleted = await naiveLog.events.count
        return outcome
    }
}

/// An ordered log written from concurrent tasks.
actor EventLog {
    private(set) var events: [String] = []
    func record(_ event: String) { events.append(event) }
}

/// Counts how many tasks are inside a region at once, and the peak.
final class PeakCounter: Sendable {
    private struct Counts { var current = 0; var peak = 0 }
    private let state = LockedState(Counts())
    func enter() async { state.withLock { $0.current += 1; $0.peak = max($0.peak, $0.current) } }
    func leave() async { state.withLock { $0.current -= 1 } }
    func currentPeak() -> Int { state.withLock { $0.peak } }
}
#endif
