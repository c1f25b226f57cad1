#if Examples
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TaskKit
import TaskKitHTTP

extension Scenario {
    /// URLTaskManager(coalescing:): a burst of identical GETs shares one round trip.
    static let coalescing = Scenario(name: "coalescing", title: "URLTaskManager coalescing — 100 identical GETs, one request") { context, record in
        let server = context.server
        let callers = 100
        // `GET /profile` takes 0.2 s: the burst arrives while the first request is in flight.
        let url = server.url("/profile?user=coalesced")

        /// Sends `callers` identical GETs at once through `manager`: how many requests reached
        /// the server, how many callers got 200, and how long the burst took.
        func burst(_ manager: URLTaskManager) async -> (requests: Int, answered: Int, elapsed: Duration) {
            let before = await server.hits(.profile)
            let started = ContinuousClock.now
            let answered = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<callers {
                    group.addTask { (try? await manager.data(for: URLRequest(url: url)).1.statusCode) == 200 }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            let elapsed = started.duration(to: .now)
            return (await server.hits(.profile) - before, answered, elapsed)
        }

        let naive = await burst(URLTaskManager(transport: URLSessionTransport(), timeout: .seconds(20)))
        let shared = await burst(
            URLTaskManager(transport: URLSessionTransport(), timeout: .seconds(20), coalescing: .standard)
        )
        record.measure(
            "without coalescing",
            "\(callers) concurrent GETs: \(naive.requests) requests upstream, \(naive.answered) × 200 in \(naive.elapsed.milliseconds)"
        )
        record.measure(
            "with coalescing",
            "\(callers) concurrent GETs: \(shared.requests) request upstream, \(shared.answered) × 200 in \(shared.elapsed.milliseconds)"
        )
        record.compare(
            "coalescing", workload: "\(callers) concurrent identical GETs", counted: "GET /profile",
            naive: Comparison.Run(count: naive.requests, seconds: naive.elapsed.seconds),
            taskKit: Comparison.Run(count: shared.requests, seconds: shared.elapsed.seconds)
        )
        record.expect("callers answered without coalescing", naive.answered, equals: callers)
        record.expect("callers answered with coalescing", shared.answered, equals: callers)
        record.expect("requests upstream without coalescing", naive.requests, equals: callers)
        record.expect("requests upstream with coalescing", shared.requests, equals: 1)
    }
}
#endif
